package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrants: [grants.ROLE] tables with work and produce lists become
// sorted (role, privilege, queue) grants; an overlay can replace a role's
// lists; show writes them back.
func TestGrants(t *testing.T) {
	src := `version = 1

[grants.mailer]
work = ["mail.*", "mail.urgent"]
produce = ["mail.outbox"]

[grants.billing]
work = ["invoices"]

[env.test.grants.mailer]
work = ["*"]
`
	c, err := parse(t, src, "")
	require.NoError(t, err)
	require.Equal(t, []Grant{
		{Role: "billing", Privilege: "work", Queue: "invoices"},
		{Role: "mailer", Privilege: "produce", Queue: "mail.outbox"},
		{Role: "mailer", Privilege: "work", Queue: "mail.*"},
		{Role: "mailer", Privilege: "work", Queue: "mail.urgent"},
	}, c.Grants)

	c, err = parse(t, src, "test")
	require.NoError(t, err)
	require.Contains(t, c.Grants, Grant{Role: "mailer", Privilege: "work", Queue: "*"})
	require.NotContains(t, c.Grants, Grant{Role: "mailer", Privilege: "work", Queue: "mail.*"})

	var b bytes.Buffer
	require.NoError(t, Write(&b, c))
	back, err := Parse("show.toml", b.Bytes(), "")
	require.NoError(t, err, b.String())
	require.Equal(t, c.Grants, back.Grants)
}

// TestGrantAndNameProblems: grants and names are checked like everything
// else, FILE:LINE: key: message; queue and policy names follow the
// database's rules (1 to 128 bytes, no control characters).
func TestGrantAndNameProblems(t *testing.T) {
	long := strings.Repeat("q", 129)
	got := problemsOf(t, `version = 1

[grants.mailer]
work = "mail.*"
own = ["x"]
produce = ["", "a\u001bb", "`+long+`", 7]

[grants."bad\u0007role"]
work = ["x"]

[grants.ok]

[queues."q\u001b[2J"]
policy = "moderate"

[queues."emails\u200b"]
policy = "moderate"

[policies."\u202eslow"]

[grants.lookalike]
work = ["mail\u2060.*"]

[policies."`+long+`"]
`, "")
	want := []string{
		`backoff.toml:4: grants.mailer.work: must be a list of queue names such as ["mail.*"], got the string "mail.*"`,
		`backoff.toml:5: grants.mailer.own: unknown key; a grant has work and produce`,
		`backoff.toml:6: grants.mailer.produce: "": a queue name or prefix must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:6: grants.mailer.produce: "a\x1bb": a queue name or prefix must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:6: grants.mailer.produce: "` + long + `": a queue name or prefix must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:6: grants.mailer.produce: must be a queue name (a string), got the integer 7`,
		`backoff.toml:8: grants."bad\arole": a role name must be 1 to 63 bytes without control or format characters`,
		`backoff.toml:11: grants.ok: a grant needs work = [...] or produce = [...]`,
		`backoff.toml:13: queues."q\x1b[2J": a queue name must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:16: queues."emails\u200b": a queue name must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:19: policies."\u202eslow": a policy name must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:22: grants.lookalike.work: "mail\u2060.*": a queue name or prefix must be 1 to 128 bytes without control or format characters`,
		`backoff.toml:24: policies.` + long + `: a policy name must be 1 to 128 bytes without control or format characters`,
	}
	for _, w := range want {
		require.Contains(t, got, w, "all problems:\n%s", strings.Join(got, "\n"))
	}
}
