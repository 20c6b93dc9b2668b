package examples

import _ "embed"

// Config is examples/backoff.toml, built into backoffctl so that `backoffctl
// demo` runs from any directory. It is the file `make demo` applies, with
// its [env.demo] overlay.
//
//go:embed backoff.toml
var Config []byte

// ConfigPath is Config's path in the repository, for messages.
const ConfigPath = "examples/backoff.toml"
