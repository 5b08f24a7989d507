package github

// mapped lists the (event, action) pairs wakegate normalizes; "*" maps
// every action of an event. Everything else is acknowledged and ignored.
var mapped = map[string]map[string]bool{
	"pull_request": {"opened": true, "reopened": true, "closed": true, "synchronize": true,
		"converted_to_draft": true, "ready_for_review": true, "edited": true, "labeled": true, "dequeued": true},
	"check_suite":         {"completed": true, "requested": true, "rerequested": true},
	"check_run":           {"completed": true, "created": true, "rerequested": true},
	"status":              {"*": true},
	"pull_request_review": {"submitted": true, "dismissed": true},
	"issue_comment":       {"created": true},
	"deployment_status":   {"*": true},
	"installation":        {"*": true},
}

// Mapped reports whether wakegate normalizes this event and action: the
// gateway answers "ignored" for the rest without normalizing them.
func Mapped(eventType, action string) bool {
	m := mapped[eventType]
	return m["*"] || m[action]
}
