package testdb

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaDumpQuery describes everything in the backoff schema that a user
// relies on, in a form that is the same on PostgreSQL 14 to 18: tables with
// their columns, constraints and indexes, and functions with their
// signatures, attributes and a digest of their bodies. NOT NULL is shown
// once, on its column: PostgreSQL 18 also lists it in pg_constraint
// (contype 'n'), which older versions do not, so those rows are left out. Ownership and grants
// are left out (they name roles that differ from server to server) and are
// tested on their own.
const schemaDumpQuery = `
SELECT line FROM (
    SELECT 1 AS part, c.relname AS obj, 0 AS ord,
           'table ' || c.relname AS line
    FROM pg_catalog.pg_class c
    WHERE c.relnamespace = 'backoff'::regnamespace AND c.relkind IN ('r', 'p')
  UNION ALL
    SELECT 1, c.relname, a.attnum,
           '  column ' || a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           -- A partition's identity is its parent's: PostgreSQL 17 and later
           -- mark it on the partitions too, older versions do not.
           || CASE WHEN a.attidentity <> '' AND NOT c.relispartition THEN ' identity ' || a.attidentity::text ELSE '' END
           || COALESCE(' default ' || pg_catalog.pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_catalog.pg_attribute a
    JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'backoff'::regnamespace AND c.relkind IN ('r', 'p')
      AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT 1, c.relname, 1000,
           '  constraint ' || pg_catalog.pg_get_constraintdef(k.oid)
    FROM pg_catalog.pg_constraint k
    JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
    WHERE c.relnamespace = 'backoff'::regnamespace AND k.contype <> 'n'
  UNION ALL
    SELECT 1, c.relname, 2000,
           '  index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
    WHERE c.relnamespace = 'backoff'::regnamespace
  UNION ALL
    SELECT 2, t.typname, 0,
           'type ' || t.typname || ' ' || t.typtype::text
           || COALESCE(' (' || (SELECT string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder)
                                FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) || ')', '')
    FROM pg_catalog.pg_type t
    WHERE t.typnamespace = 'backoff'::regnamespace AND t.typtype IN ('e', 'c', 'd')
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c')
  UNION ALL
    SELECT 3, p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', 0,
           CASE WHEN p.prokind = 'p' THEN 'procedure ' ELSE 'function ' END
           || p.proname || '(' || pg_catalog.pg_get_function_arguments(p.oid) || ')'
           || COALESCE(' returns ' || pg_catalog.pg_get_function_result(p.oid), '')
           || ' language ' || l.lanname
           || ' ' || CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END
           || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END
           || COALESCE(' config ' || array_to_string(p.proconfig, ','), '')
           || ' body md5 ' || md5(p.prosrc)
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_language l ON l.oid = p.prolang
    WHERE p.pronamespace = 'backoff'::regnamespace
) dump
ORDER BY part, obj, ord, line`

// DumpSchema returns the backoff schema of the database conn is connected
// to, one line per object or attribute, for golden-file comparison.
func DumpSchema(ctx context.Context, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (string, error) {
	rows, err := conn.Query(ctx, schemaDumpQuery)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n") + "\n", nil
}
