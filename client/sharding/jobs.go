package sharding

// ShardBits is where a job id carries its shard: shard k allocates the ids
// k<<48+1 .. (k+1)<<48-1 (docs/adr/0034-job-ids-carry-the-shard.md).
const ShardBits = 48

// ShardOfJob is the shard that holds job id: the id's high bits, as the
// router routes every call by job id (complete, fail, heartbeat, ...). It
// is the twin of the router's ShardOfJob (a test compares them). A job
// moved to another shard (docs/adr/0092) has a new id, in its new shard's
// range.
func ShardOfJob(id int64) int { return int(id >> ShardBits) }
