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
