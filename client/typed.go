package client

import (
	"context"
	"encoding/json"
	"fmt"
)

// HandlerFor makes a Handler from a function of the job's decoded payload:
// the payload is decoded as JSON into a T before h runs. A payload that does
// not decode can never succeed, so its job is dead-lettered at once
// (Permanent) with an error that names the job and the type, e.g.
// `decode payload of job 7 as client_test.Email: json: ...`.
//
//	w, err := client.NewWorker(pool, client.WorkerConfig{
//		Queue:   "emails",
//		Handler: client.HandlerFor(func(ctx context.Context, job *client.Job, e Email) error {
//			return send(ctx, e)
//		}),
//	})
func HandlerFor[T any](h func(ctx context.Context, job *Job, payload T) error) Handler {
	return func(ctx context.Context, job *Job) error {
		var v T
		if err := json.Unmarshal(job.Payload, &v); err != nil {
			return Permanent(fmt.Errorf("decode payload of job %d as %T: %w", job.ID, v, err))
		}
		return h(ctx, job, v)
	}
}

// HandlerWithOutput is HandlerFor for a handler that returns its result:
// when h returns no error, its output (JSON-encoded, as SetOutput takes
// it) is recorded as the job's output when the job completes, for
// JobOutput, WaitForOutput and the dependents' ParentOutputs
// (docs/workflows.md).
//
//	Handler: client.HandlerWithOutput(func(ctx context.Context, job *client.Job, o Order) (Invoice, error) {
//		return bill(ctx, o)
//	}),
func HandlerWithOutput[T, O any](h func(ctx context.Context, job *Job, payload T) (O, error)) Handler {
	return HandlerFor(func(ctx context.Context, job *Job, payload T) error {
		out, err := h(ctx, job, payload)
		if err != nil {
			return err
		}
		return SetOutput(ctx, out)
	})
}
