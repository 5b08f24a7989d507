package github

import "fmt"

// Normalize used to parse every payload twice: the envelope (action,
// repository), then the typed payload of its event. A 28 KB
// pull_request body is most of the deriver's parsing time, so a mapped
// event's payload is now decoded together with its envelope in one pass,
// into the structs below: each is the envelope plus the event's payload
// struct, so it decodes exactly what the two passes decoded, with the
// same types.
//
// Errors keep their old meaning and text: when the one pass fails,
// decodePayload falls back to the envelope alone and the handler decodes
// its payload again, as before. (The one pass can fail where the two
// passes did not only for an action that is not mapped, whose payload the
// two passes never decoded: the fallback then ignores it, as before.)

type prOnce struct {
	envelope
	pullRequestPayload
}

type checkRunOnce struct {
	envelope
	checkRunPayload
}

type checkSuiteOnce struct {
	envelope
	checkSuitePayload
}

type statusOnce struct {
	envelope
	statusPayload
}

type reviewOnce struct {
	envelope
	reviewPayload
}

type commentOnce struct {
	envelope
	issueCommentPayload
}

type deploymentOnce struct {
	envelope
	deploymentStatusPayload
}

// installationOnce cannot embed envelope: both name "installation", and
// two promoted fields of one name cancel out. installationPayload's
// installation has the envelope's id (an int64) and more.
type installationOnce struct {
	Action     string `json:"action"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	installationPayload
}

// decodePayload decodes body's envelope and, for a mapped event, its
// typed payload in the same pass; pre is then a pointer to the payload
// struct its handler takes (*pullRequestPayload …). When the one pass
// fails (or the event has no typed payload), pre is nil and only the
// envelope was decoded; err is the envelope's error.
func decodePayload(eventType string, body []byte) (env envelope, pre any, err error) {
	switch eventType {
	case "pull_request":
		var u prOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.pullRequestPayload, nil
		}
	case "check_run":
		var u checkRunOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.checkRunPayload, nil
		}
	case "check_suite":
		var u checkSuiteOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.checkSuitePayload, nil
		}
	case "status":
		var u statusOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.statusPayload, nil
		}
	case "pull_request_review":
		var u reviewOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.reviewPayload, nil
		}
	case "issue_comment":
		var u commentOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.issueCommentPayload, nil
		}
	case "deployment_status":
		var u deploymentOnce
		if unmarshal(body, &u) == nil {
			return u.envelope, &u.deploymentStatusPayload, nil
		}
	case "installation":
		var u installationOnce
		if unmarshal(body, &u) == nil {
			env.Action, env.Repository.FullName = u.Action, u.Repository.FullName
			if u.Installation != nil {
				env.Installation.ID = u.Installation.ID
			}
			return env, &u.installationPayload, nil
		}
	}
	err = unmarshal(body, &env)
	return env, nil, err
}

// payloadAs returns the payload decodePayload decoded (pre), or decodes
// it from body when the one pass did not.
func payloadAs[T any](f *Fact, body []byte, pre any) (*T, error) {
	if p, ok := pre.(*T); ok {
		return p, nil
	}
	if pre != nil {
		panic(fmt.Sprintf("github: %s payload decoded as %T", f.Event, pre))
	}
	p := new(T)
	if err := f.decode(body, p); err != nil {
		return nil, err
	}
	return p, nil
}
