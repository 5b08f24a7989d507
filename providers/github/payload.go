package github

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The structs below decode only what Normalize uses of GitHub's payloads
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads).

type user struct {
	Login string `json:"login"`
}

type label struct {
	Name string `json:"name"`
}

type gitRef struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

type prRef struct {
	Number int `json:"number"`
}

type app struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

type pullRequest struct {
	Number    int     `json:"number"`
	State     string  `json:"state"`
	Title     string  `json:"title"`
	Body      string  `json:"body"` // read for its Wakegate-Session trailer only
	HTMLURL   string  `json:"html_url"`
	Draft     bool    `json:"draft"`
	Merged    bool    `json:"merged"`
	User      user    `json:"user"`
	Head      gitRef  `json:"head"`
	Base      gitRef  `json:"base"`
	Labels    []label `json:"labels"`
	ClosedAt  ghTime  `json:"closed_at"`
	UpdatedAt ghTime  `json:"updated_at"`
}

type pullRequestPayload struct {
	Number      int          `json:"number"`
	Before      string       `json:"before"` // synchronize
	Label       *label       `json:"label"`  // labeled
	Reason      string       `json:"reason"` // dequeued
	PullRequest *pullRequest `json:"pull_request"`
}

type checkRunPayload struct {
	CheckRun *struct {
		Name         string  `json:"name"`
		HeadSHA      string  `json:"head_sha"`
		Status       string  `json:"status"`
		Conclusion   string  `json:"conclusion"`
		StartedAt    ghTime  `json:"started_at"`
		CompletedAt  ghTime  `json:"completed_at"`
		HTMLURL      string  `json:"html_url"`
		App          app     `json:"app"`
		PullRequests []prRef `json:"pull_requests"`
	} `json:"check_run"`
}

type checkSuitePayload struct {
	CheckSuite *struct {
		ID           int64   `json:"id"`
		HeadSHA      string  `json:"head_sha"`
		Status       string  `json:"status"`
		Conclusion   string  `json:"conclusion"`
		UpdatedAt    ghTime  `json:"updated_at"`
		App          app     `json:"app"`
		PullRequests []prRef `json:"pull_requests"`
	} `json:"check_suite"`
}

type statusPayload struct {
	SHA         string `json:"sha"`
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
	CreatedAt   ghTime `json:"created_at"`
	UpdatedAt   ghTime `json:"updated_at"`
}

type reviewPayload struct {
	Review *struct {
		State       string `json:"state"`
		CommitID    string `json:"commit_id"`
		SubmittedAt ghTime `json:"submitted_at"`
		HTMLURL     string `json:"html_url"`
		User        user   `json:"user"`
	} `json:"review"`
	PullRequest *pullRequest `json:"pull_request"`
}

type issueCommentPayload struct {
	Issue *struct {
		Number      int       `json:"number"`
		Title       string    `json:"title"`
		PullRequest *struct{} `json:"pull_request"` // present only when the issue is a PR
	} `json:"issue"`
	Comment *struct {
		Body      string `json:"body"`
		HTMLURL   string `json:"html_url"`
		User      user   `json:"user"`
		CreatedAt ghTime `json:"created_at"`
	} `json:"comment"`
}

type deploymentStatusPayload struct {
	DeploymentStatus *struct {
		State       string `json:"state"`
		Environment string `json:"environment"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
		LogURL      string `json:"log_url"`
		Creator     user   `json:"creator"`
		CreatedAt   ghTime `json:"created_at"`
		UpdatedAt   ghTime `json:"updated_at"`
	} `json:"deployment_status"`
	Deployment *struct {
		ID          int64  `json:"id"`
		SHA         string `json:"sha"`
		Ref         string `json:"ref"`
		Environment string `json:"environment"`
	} `json:"deployment"`
}

type installationPayload struct {
	Installation *struct {
		ID      int64 `json:"id"`
		AppID   int64 `json:"app_id"`
		Account struct {
			Login string `json:"login"`
		} `json:"account"`
		TargetType  string `json:"target_type"`
		CreatedAt   ghTime `json:"created_at"`
		SuspendedAt ghTime `json:"suspended_at"`
	} `json:"installation"`
	Repositories []struct {
		FullName string `json:"full_name"`
	} `json:"repositories"`
}

// ghTime is a GitHub timestamp: an RFC 3339 string, Unix seconds (the
// installation object), null or "" (zero). It is always UTC and within the
// years 1–9999, so it survives a JSON round trip.
type ghTime struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *ghTime) UnmarshalJSON(b []byte) error {
	var v time.Time
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if plainString(b) {
			s = string(b[1 : len(b)-1]) // what json.Unmarshal would give, without its reflection
		} else if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			return nil
		}
		p, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		v = p
	default:
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("timestamp %.40s: not RFC 3339 or Unix seconds", b)
		}
		v = time.Unix(n, 0)
	}
	v = v.UTC()
	if y := v.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("timestamp %.40s: out of range", b)
	}
	t.Time = v
	return nil
}

// plainString reports whether b is a JSON string literal of printable ASCII
// with no escapes: its value is then the bytes between the quotes.
func plainString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return false
	}
	for _, c := range b[1 : len(b)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
