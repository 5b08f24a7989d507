package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// TestGitHubAppSettings: the App's private key is a secret (environment
// or _FILE, one-line PEM with literal \n accepted, never a flag); it needs
// the numeric App id; a bad key or API URL stops the start without the
// error quoting the key; without a key the App is off.
func TestGitHubAppSettings(t *testing.T) {
	_, pem := apptest.Key()
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	oneLine := strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", `\n`)
	bad := "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----"
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*config) bool
		wantErr string
	}{
		{"off by default", nil, nil, func(c *config) bool {
			return c.GitHubAppKey == "" && c.GitHubAPIURL == app.DefaultAPIURL
		}, ""},
		{"key from file", nil, map[string]string{"WAKEGATE_GITHUB_APP_ID": apptest.AppID, "WAKEGATE_GITHUB_APP_PRIVATE_KEY_FILE": keyFile}, func(c *config) bool {
			return c.GitHubAppKey == strings.TrimSpace(string(pem))
		}, ""},
		{"one-line key", nil, map[string]string{"WAKEGATE_GITHUB_APP_ID": apptest.AppID, "WAKEGATE_GITHUB_APP_PRIVATE_KEY": oneLine}, func(c *config) bool {
			_, err := app.ParseKey([]byte(c.GitHubAppKey))
			return err == nil
		}, ""},
		{"enterprise API", []string{"--github-api-url", "https://ghe.example.com/api/v3"}, map[string]string{"WAKEGATE_GITHUB_APP_ID": apptest.AppID, "WAKEGATE_GITHUB_APP_PRIVATE_KEY": string(pem)}, func(c *config) bool {
			return c.gitHubApp().APIURL == "https://ghe.example.com/api/v3"
		}, ""},
		{"key needs the id", nil, map[string]string{"WAKEGATE_GITHUB_APP_PRIVATE_KEY": string(pem)}, nil, "WAKEGATE_GITHUB_APP_ID"},
		{"bad key", nil, map[string]string{"WAKEGATE_GITHUB_APP_ID": apptest.AppID, "WAKEGATE_GITHUB_APP_PRIVATE_KEY": bad}, nil, "WAKEGATE_GITHUB_APP_PRIVATE_KEY"},
		{"bad API URL", []string{"--github-api-url", "ftp://x"}, map[string]string{"WAKEGATE_GITHUB_APP_ID": apptest.AppID, "WAKEGATE_GITHUB_APP_PRIVATE_KEY": string(pem)}, nil, "WAKEGATE_GITHUB_API_URL"},
		{"the key is not a flag", []string{"--github-app-private-key", "x"}, nil, nil, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "bm90IGEga2V5") || strings.Contains(err.Error(), strings.Split(string(pem), "\n")[1]) {
					t.Fatal("the error quotes the key")
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("err %v", err)
			}
		})
	}
}
