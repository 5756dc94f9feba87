package redact

import (
	"regexp"
	"strings"
)

// nameWithWord is a name holding a credential word, as it appears in free
// text (the same words as namedValue).
const nameWithWord = `[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|credential|api[_-]?key|access[_-]?key|private[_-]?key|client-key-data)[A-Za-z0-9_.-]*`

// quotedValue is `name: "value"`, `name='value'`, `"name": "value"` or
// `\"name\":\"value\"` (JSON inside a quoted string): the value runs to its
// closing quote, over spaces, escaped quotes (\" in double quotes, ” in
// single quotes, as YAML writes them) and line breaks.
var quotedValue = regexp.MustCompile(`(?i)(` + nameWithWord + `)(\\?["']?[ \t]*[:=][ \t]*)` +
	`(\\"(?:[^"\\]|\\\\\\"|\\[^"])*\\"|"(?:[^"\\]|\\[\s\S])*"|'(?:[^']|'')*')`)

// quotedText replaces the quoted values of quotedValue, keeping the quotes.
func quotedText(s string, n *int) string {
	return quotedValue.ReplaceAllStringFunc(s, func(m string) string {
		p := quotedValue.FindStringSubmatch(m)
		q := `"`
		switch {
		case strings.HasPrefix(p[3], `\"`):
			q = `\"`
		case p[3][0] == '\'':
			q = `'`
		}
		inner := p[3][len(q) : len(p[3])-len(q)]
		if inner == "" || inner == Redacted || !CredentialName(p[1]) || secretReference(p[1], inner) {
			return m
		}
		*n++
		return p[1] + p[2] + q + Redacted + q
	})
}

// blockKey is a YAML line `name:` with nothing after it but a block scalar
// indicator (|, >, |-, >+, |2, ...) and a comment: its value is on the
// lines below, indented deeper than name.
var blockKey = regexp.MustCompile(`(?i)^(\s*(?:-\s+)?)(["']?)(` + nameWithWord + `)(["']?[ \t]*:)[ \t]*(?:([|>][-+0-9]*)[ \t]*(?:#.*)?)?$`)

// nestedKey starts a line of a block mapping or sequence: a key below a
// name with no value makes the value a mapping, not a credential.
var nestedKey = regexp.MustCompile(`^\s*(?:-(?:\s|$)|[^\s#"'{\[][^:]*:(?:\s|$)|["'][^"']*["']\s*:(?:\s|$))`)

// blockText replaces the value of each credential-named YAML key whose
// value is on the following lines: a block scalar (`password: |` and its
// indented lines), or a plain or quoted scalar written on the next lines.
// The key keeps its line, `name: REDACTED`, and the value's lines go.
func blockText(s string, n *int) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		line, cr := strings.CutSuffix(lines[i], "\r")
		p := blockKey.FindStringSubmatch(line)
		if p == nil || !CredentialName(p[3]) {
			out = append(out, lines[i])
			continue
		}
		next := firstNonBlank(lines[i+1:])
		if indent(next) <= len(p[1]) || (p[5] == "" && nestedKey.MatchString(next)) {
			out = append(out, lines[i])
			continue
		}
		end := blockEnd(lines, i, len(p[1]))
		*n++
		head := p[1] + p[2] + p[3] + p[4] + " " + Redacted
		if cr {
			head += "\r"
		}
		out = append(out, head)
		i = end - 1
	}
	return strings.Join(out, "\n")
}

// blockEnd is the index of the first line after lines[key] that is not
// part of the key's value: the value's lines are indented deeper than col
// (the key's column), or blank between such lines. Blank lines after the
// value are not part of it.
func blockEnd(lines []string, key, col int) int {
	end := key + 1
	for j := key + 1; j < len(lines); j++ {
		l := strings.TrimSuffix(lines[j], "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if indent(l) <= col {
			break
		}
		end = j + 1
	}
	return end
}

// firstNonBlank is the first of lines with more than white space ("": none).
func firstNonBlank(lines []string) string {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return strings.TrimSuffix(l, "\r")
		}
	}
	return ""
}

// indent is the width of l's leading white space; -1 for a blank line.
func indent(l string) int {
	if strings.TrimSpace(l) == "" {
		return -1
	}
	return len(l) - len(strings.TrimLeft(l, " \t"))
}
