// Package docstest keeps the documentation true to the repository (its tests run in make
// test): every relative link and #anchor resolves, every `make X` is a Makefile target, every
// `fleetwright …` / `kubectl fleetwright …` is a command of the CLI, the ports and object names
// the docs give are deploy/'s, and docs/settings.md lists every setting of every service as its
// --help gives it.
//
//	*.md ──> code (fenced blocks, `spans`) ──> make targets, CLI commands, kubectl object refs
//	     └─> prose ─────────────────────────> links and anchors, "<service> … :808N" ports
//	services' --help ──> docs/settings.md (go test ./tools/docstest -run TestSettingsReference -update)
package docstest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// doc is one markdown file: its text, and its code (fenced blocks and inline spans) apart.
type doc struct {
	Path string // relative to the repository, slash-separated
	Text string
	// Prose is the text with code blocks and spans blanked out (line numbers kept).
	Prose string
	// Code is every fenced block's lines and every inline span, one entry each.
	Code []string
}

var (
	fence      = regexp.MustCompile("(?m)^\\s*```")
	inlineCode = regexp.MustCompile("`[^`\n]+`")
)

// markdownFiles are the repository's markdown files (.local, .git and node_modules aside).
func markdownFiles(root string) ([]doc, error) {
	var out []doc
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".local" || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, parseDoc(filepath.ToSlash(rel), string(b)))
		return nil
	})
	return out, err
}

// parseDoc splits a markdown text into prose and code.
func parseDoc(path, text string) doc {
	d := doc{Path: path, Text: text}
	var prose strings.Builder
	in := false
	var block []string
	for _, line := range strings.SplitAfter(text, "\n") {
		if fence.MatchString(line) {
			if in {
				d.Code = append(d.Code, block...)
				block = nil
			}
			in = !in
			prose.WriteString("\n")
			continue
		}
		if in {
			block = append(block, strings.TrimRight(line, "\n"))
			prose.WriteString("\n")
			continue
		}
		for _, span := range inlineCode.FindAllString(line, -1) {
			d.Code = append(d.Code, strings.Trim(span, "`"))
		}
		prose.WriteString(inlineCode.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) }))
	}
	d.Prose = prose.String()
	return d
}

var (
	heading  = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkExpr = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// anchors are a markdown file's heading anchors as GitHub makes them: lower case, punctuation
// other than hyphens and underscores dropped, spaces to hyphens, a repeat numbered -1, -2, ...
func anchors(d doc) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(d.Prose, -1) {
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(d.Text, -1) {
		out[m[1]] = true
	}
	return out
}

func slugify(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1") // a link's text
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// links are the relative links of a file's prose (code is not linked).
func links(d doc) []string {
	var out []string
	for _, m := range linkExpr.FindAllStringSubmatch(d.Prose, -1) {
		l := m[1]
		if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
			continue
		}
		out = append(out, l)
	}
	return out
}
