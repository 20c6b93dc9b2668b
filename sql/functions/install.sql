-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
{{ template "schema_version.sql" . }}
{{ template "_interval_us.sql" . }}
{{ template "_clamped_power.sql" . }}
{{ template "_jitter_unit.sql" . }}
{{ template "_delay_us.sql" . }}
{{ template "_policy_delay_us.sql" . }}
{{ template "retry_delay.sql" . }}
{{ template "compute_delay.sql" . }}
{{ template "schedule.sql" . }}
{{ template "_step_backoff.sql" . }}
{{ template "calculate_step_next_retry_time.sql" . }}
