// Package kind names what went wrong with a request, whatever package
// found it: input that breaks the grammar, a thing that does not exist, a
// conflict, a refusal, something too large, a dependency away. The
// gateway answers each kind with its one HTTP status (docs/design.md
// §13); an error is told by its kind (errors.Is), never by its text.
//
// A package keeps its own sentinel errors, each made with New so that
// errors.Is(err, pkg.ErrX) and errors.Is(err, kind.X) both hold.
package kind

import "errors"

// The kinds. Each names the status the gateway answers it with.
var (
	Invalid       = errors.New("invalid")       // 400: bad input, malformed or out of the grammar
	Unprocessable = errors.New("unprocessable") // 422: well-formed input that cannot be applied
	NotFound      = errors.New("not found")     // 404
	Conflict      = errors.New("conflict")      // 409: the state forbids it now (held, busy, linked elsewhere)
	Forbidden     = errors.New("forbidden")     // 403: the caller may not
	TooLarge      = errors.New("too large")     // 413
	Limit         = errors.New("limit reached") // 422: a per-party or per-workspace bound is reached
	Unavailable   = errors.New("unavailable")   // 503: a dependency did not answer; retrying is safe
)

// New returns a sentinel error with text msg, of kind k.
func New(k error, msg string) error { return &kinded{kind: k, msg: msg} }

type kinded struct {
	kind error
	msg  string
}

func (e *kinded) Error() string { return e.msg }

// Is makes errors.Is(err, k) hold for the kind it was made with.
func (e *kinded) Is(target error) bool { return target == e.kind }

// Of returns the kind of err (nil: none).
func Of(err error) error {
	for _, k := range []error{Invalid, Unprocessable, NotFound, Conflict, Forbidden, TooLarge, Limit, Unavailable} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
