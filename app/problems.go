package app

import (
	"log/slog"
	"strings"
)

// logProblems logs err as one line saying what happened (msg, with the
// number of problems) and then one line per problem, so that every log
// line reads as it is: a multi-line error in one attribute comes out of
// the text and JSON handlers as one line of escaped newlines. The problems
// are the leaves of errors that join several (config.Errors,
// errors.Join); an error of one problem whose text still spans lines is
// split at its newlines.
func logProblems(log *slog.Logger, msg string, err error) {
	problems := problemsOf(err)
	log.Error(msg, "problems", len(problems))
	for _, p := range problems {
		log.Error(msg+": problem", "problem", p)
	}
}

// problemsOf lists err's problems, one line each.
func problemsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			if parts := j.Unwrap(); len(parts) > 0 {
				for _, p := range parts {
					walk(p)
				}
				return
			}
		}
		for _, line := range strings.Split(e.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	if err == nil {
		return nil
	}
	walk(err)
	if len(out) == 0 {
		out = append(out, "no detail given")
	}
	return out
}
