package clienttest_test

import (
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
