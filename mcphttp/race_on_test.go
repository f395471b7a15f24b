//go:build race

package mcphttp

// raceDetector is true when the tests run with -race.
const raceDetector = true
