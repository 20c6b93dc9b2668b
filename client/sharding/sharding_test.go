package sharding

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestConnConfig: the shard's host, port and database with the base's
// user, password and TLS choices (sslmode=prefer keeps its plain fallback,
// at the shard's address).
func TestConnConfig(t *testing.T) {
	base, err := pgx.ParseConfig("postgres://app:secret@router.example:5432/jobs?sslmode=prefer&application_name=x")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Shard{Number: 2, Conninfo: "host=db2.example port=6432 dbname=jobs2"}.ConnConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "db2.example" || cfg.Port != 6432 || cfg.Database != "jobs2" {
		t.Fatalf("address %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	}
	if cfg.User != "app" || cfg.Password != "secret" || cfg.RuntimeParams["application_name"] != "x" {
		t.Fatalf("credentials or settings lost: %q %q %v", cfg.User, cfg.Password, cfg.RuntimeParams)
	}
	if cfg.TLSConfig == nil || cfg.TLSConfig.ServerName != "db2.example" {
		t.Fatalf("TLS: %+v", cfg.TLSConfig)
	}
	if len(cfg.Fallbacks) != 1 || cfg.Fallbacks[0].TLSConfig != nil || cfg.Fallbacks[0].Host != "db2.example" || cfg.Fallbacks[0].Port != 6432 {
		t.Fatalf("fallbacks: %+v", cfg.Fallbacks)
	}
	if base.Host != "router.example" || base.TLSConfig.ServerName != "router.example" {
		t.Fatal("base was modified")
	}
	if _, err := (Shard{Conninfo: "host='unterminated"}).ConnConfig(base); err == nil {
		t.Fatal("a bad connection string is refused")
	}
}

// TestLayoutQueueShard: a placed queue is on its shard; any other follows
// the hash rule of the layout's hash shard count, not of its shard count.
func TestLayoutQueueShard(t *testing.T) {
	l := Layout{HashShards: 3, Shards: 5, Placed: map[string]int{"emails": 4}}
	if k, placed := l.QueueShard("emails"); k != 4 || !placed {
		t.Fatalf("emails: shard %d, placed %v", k, placed)
	}
	for i := range 200 {
		q := "q-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if k, placed := l.QueueShard(q); k != QueueShard(q, 3) || placed {
			t.Fatalf("%s: shard %d, placed %v, want the hash rule's %d", q, k, placed, QueueShard(q, 3))
		}
	}
}
