package main

import (
	"fmt"
	"strings"
)

// alternate runs base and then test in even rounds, test and then base in
// odd ones (each returns a rate), and returns their rates and each round's
// test/base ratio.
func alternate(rounds int, base, test func() (float64, error)) (tests, bases, ratios []float64, err error) {
	for r := range rounds {
		order := []bool{false, true} // is the run test's
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, isTest := range order {
			run := base
			if isTest {
				run = test
			}
			rate, err := run()
			if err != nil {
				return nil, nil, nil, err
			}
			if isTest {
				tests = append(tests, rate)
			} else {
				bases = append(bases, rate)
			}
		}
		ratios = append(ratios, tests[r]/bases[r])
	}
	return tests, bases, ratios, nil
}

// roundRatios prints each round's ratio.
func roundRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}
