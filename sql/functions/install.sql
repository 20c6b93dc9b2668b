-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
{{ template "schema_version.sql" . }}
{{ template "_interval_us.sql" . }}
{{ template "_clamped_power.sql" . }}
{{ template "_jitter_unit.sql" . }}
{{ template "_delay_us.sql" . }}
{{ template "_policy_delay_us.sql" . }}
{{ template "retry_delay.sql" . }}
{{ template "_iso8601.sql" . }}
{{ template "_push_error.sql" . }}
{{ template "_job_policy.sql" . }}
{{ template "_retry_decision.sql" . }}
{{ template "_raise_fencing_error.sql" . }}
{{ template "enqueue.sql" . }}
{{ template "claim.sql" . }}
{{ template "acquire.sql" . }}
{{ template "complete.sql" . }}
{{ template "complete_many.sql" . }}
{{ template "fail.sql" . }}
{{ template "reap.sql" . }}
{{ template "heartbeat.sql" . }}
{{ template "snooze.sql" . }}
{{ template "cancel.sql" . }}
{{ template "replay.sql" . }}
{{ template "prune.sql" . }}
{{ template "stats.sql" . }}
