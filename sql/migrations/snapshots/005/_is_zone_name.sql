-- backoff._is_zone_name(name): whether name is a time zone of the IANA
-- database that PostgreSQL has, such as 'UTC', 'Europe/Berlin' or
-- 'EST5EDT'. Not by reading pg_timezone_names: that view walks the whole
-- zone directory and fails on any broken link in it (a dangling
-- 'localtime' link is common), so the check would break a server for
-- something unrelated. Instead the name is set as the transaction's
-- TimeZone, which takes zone files and POSIX strings but refuses
-- abbreviations ('CEST') and unknown names ('Mars/Olympus'), and POSIX
-- strings are refused by their shape: an offset written in digits
-- ('UTC+3', 'EST5'), which no zone file name has but the four legacy US
-- zones and Etc/GMT±N, of which only the offsets the database has
-- (Etc/GMT-14 to Etc/GMT+12) pass: PostgreSQL reads any other as a POSIX
-- string. The zone files that name no place are refused by name:
-- posixrules (the template for POSIX strings), localtime (whatever the
-- host's zone is) and Factory (no time zone at all). Private
-- (docs/adr/0063).
CREATE OR REPLACE FUNCTION backoff._is_zone_name(p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_saved text := pg_catalog.current_setting('timezone');
BEGIN
    IF p_name !~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$'
       OR (p_name ~ '^[A-Za-z]+[+-]?[0-9]' AND p_name NOT IN ('EST5EDT', 'CST6CDT', 'MST7MDT', 'PST8PDT'))
       OR (p_name ~ '[+-][0-9]' AND p_name !~ '^Etc/GMT(-([0-9]|1[0-4])|[+]([0-9]|1[0-2]))$')
       OR pg_catalog.lower(p_name) IN ('posixrules', 'localtime', 'factory') THEN
        RETURN false;
    END IF;
    BEGIN
        PERFORM pg_catalog.set_config('timezone', p_name, true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RETURN false;
    END;
    PERFORM pg_catalog.set_config('timezone', v_saved, true);
    RETURN true;
END
$$;
