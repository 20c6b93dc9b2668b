package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// CheckCron checks the syntax of a 5-field cron expression the way
// backoff._parse_cron does, with the same message, so that `config
// validate` finds a bad expression without a database. The two are kept
// equal by the shared vectors in testdata/cron_vectors.json, which a Go
// test runs here and a PostgreSQL test runs against the SQL
// (internal/sqltest/lifecycle). Whether the expression ever fires (30
// February) is the database's check, at apply.
func CheckCron(expr string) error {
	if len(expr) > 256 {
		r := []rune(expr)
		if len(r) > 64 {
			r = r[:64]
		}
		return fmt.Errorf("cron %s: want 5 fields of at most 256 bytes in all (minute hour day-of-month month day-of-week)", quoteSQL(string(r)))
	}
	text := strings.ToLower(strings.Trim(expr, " \t\n\r"))
	if m, ok := cronMacros[text]; ok {
		text = m
	}
	fields := cronSpace.Split(text, -1)
	if text == "" || len(fields) != 5 {
		n := len(fields)
		if text == "" {
			n = 0
		}
		return fmt.Errorf("cron %s: want 5 fields (minute hour day-of-month month day-of-week), got %d", quoteSQL(expr), n)
	}
	for i, name := range cronMonths {
		fields[3] = wordRegexp(name).ReplaceAllString(fields[3], strconv.Itoa(i+1))
	}
	for i, name := range cronWeekdays {
		fields[4] = wordRegexp(name).ReplaceAllString(fields[4], strconv.Itoa(i))
	}
	for i, f := range cronFields {
		if err := checkCronField(expr, fields[i], f.name, f.min, f.max); err != nil {
			return err
		}
	}
	return nil
}

var cronMacros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
	"@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var (
	cronSpace    = regexp.MustCompile(`\s+`)
	cronItem     = regexp.MustCompile(`^(\*|([0-9]{1,4})(?:-([0-9]{1,4}))?)(?:/([0-9]{1,4}))?$`)
	cronMonths   = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	cronWeekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	cronFields   = []struct {
		name     string
		min, max int
	}{{"minute", 0, 59}, {"hour", 0, 23}, {"day-of-month", 1, 31}, {"month", 1, 12}, {"day-of-week", 0, 7}}
)

// wordRegexp matches name as a whole word, as PostgreSQL's \m...\M does.
func wordRegexp(name string) *regexp.Regexp { return regexp.MustCompile(`\b` + name + `\b`) }

// quoteSQL renders s in double quotes as RAISE's format does: as is.
func quoteSQL(s string) string { return `"` + s + `"` }

func checkCronField(expr, field, name string, lo, hi int) error {
	where := fmt.Sprintf("cron %s: %s field %s", quoteSQL(expr), name, quoteSQL(field))
	for _, item := range strings.Split(field, ",") {
		if item == "" {
			return fmt.Errorf("%s has an empty list item", where)
		}
		m := cronItem.FindStringSubmatch(item)
		if m == nil {
			return fmt.Errorf("%s is not *, a number, a range a-b or a step (*/n, a-b/n) of numbers in %d-%d", where, lo, hi)
		}
		a, b := lo, hi
		if m[1] != "*" {
			a, _ = strconv.Atoi(m[2])
			b = a
			if m[3] != "" {
				b, _ = strconv.Atoi(m[3])
			}
			if a < lo || a > hi || b < lo || b > hi {
				return fmt.Errorf("%s is outside %d-%d", where, lo, hi)
			}
			if b < a {
				return fmt.Errorf("%s has a range from high to low (%d-%d)", where, a, b)
			}
		}
		if m[4] != "" {
			step, _ := strconv.Atoi(m[4])
			if step < 1 || step > hi-lo+1 {
				return fmt.Errorf("%s has step %d, want 1-%d", where, step, hi-lo+1)
			}
			if m[1] != "*" && m[3] == "" {
				return fmt.Errorf("%s has a step without a range (write %d-%d/%d)", where, a, hi, step)
			}
		}
	}
	return nil
}
