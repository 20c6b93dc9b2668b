-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and its COMMENT.
{{ template "schema_version.sql" . }}
