package github

import (
	"fmt"
	"strings"
)

// RepoMap maps repositories to values by exact name, then owner/*, then *:
// WAKEGATE_WORKSPACES (`org/repo=ws,org/*=ws2,*=default`) and
// WAKEGATE_REQUIRED_CHECKS (`org/repo=build,lint;org/*=test`).
type RepoMap[V any] struct {
	exact map[string]V
	owner map[string]V
	all   *V
}

// Lookup returns the value for a repository "org/repo".
func (m *RepoMap[V]) Lookup(repo string) (V, bool) {
	if v, ok := m.exact[strings.ToLower(repo)]; ok {
		return v, true
	}
	if owner, _, ok := strings.Cut(repo, "/"); ok {
		if v, ok := m.owner[strings.ToLower(owner)]; ok {
			return v, true
		}
	}
	if m.all != nil {
		return *m.all, true
	}
	var zero V
	return zero, false
}

func parseRepoMap[V any](spec, sep string, value func(string) (V, error)) (*RepoMap[V], error) {
	m := &RepoMap[V]{exact: map[string]V{}, owner: map[string]V{}}
	for _, entry := range strings.Split(spec, sep) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		pat, raw, ok := strings.Cut(entry, "=")
		pat = strings.ToLower(strings.TrimSpace(pat))
		if !ok || pat == "" {
			return nil, fmt.Errorf("%q: want <org/repo|org/*|*>=<value>", entry)
		}
		v, err := value(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		switch owner, repo, _ := strings.Cut(pat, "/"); {
		case pat == "*":
			m.all = &v
		case repo == "*":
			m.owner[owner] = v
		case repo != "" && !strings.Contains(repo, "/"):
			m.exact[pat] = v
		default:
			return nil, fmt.Errorf("%q: want <org/repo|org/*|*>=<value>", entry)
		}
	}
	return m, nil
}

// ParseWorkspaces parses WAKEGATE_WORKSPACES; valid reports whether a
// workspace name is acceptable.
func ParseWorkspaces(spec string, valid func(string) bool) (*RepoMap[string], error) {
	return parseRepoMap(spec, ",", func(v string) (string, error) {
		if !valid(v) {
			return "", fmt.Errorf("workspace %q is not a valid name", v)
		}
		return v, nil
	})
}

// ParseRequiredChecks parses WAKEGATE_REQUIRED_CHECKS.
func ParseRequiredChecks(spec string) (*RepoMap[[]string], error) {
	return parseRepoMap(spec, ";", func(v string) ([]string, error) {
		var names []string
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("no check names")
		}
		return names, nil
	})
}
