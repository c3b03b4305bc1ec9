// Package docs_test keeps the repository's prose about what holds now: no
// file (a document, a migration, a configuration, a Go comment) narrates
// when or in which working session something was done (an ordinal or a
// number with the word, or "this", "last" or "next" before it), or cites a
// tracker's numbers ("issue 22", "(#14)"). git log and the tracker keep that history; a reader of a
// file needs what is true of the code beside it. The reference documents
// (references) go further: no commit's hash, no date, no origin told, no
// aside on how the code departs from the text, no VM set against another.
//
// "Session" stays a technical word here (DATABASE_SESSION_URL, a session
// past the pooler, session-mode pooling, the locks a session holds): only
// an ordinal or a number with it, or the narrating phrases below, fail.
package docs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// self is this file, relative to the repository's root: its table of
// samples holds the very phrases it looks for, so it is not scanned.
const self = "docs/narration_test.go"

// ordinals are the ordinal words a numbered session is narrated with.
const ordinals = `first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|` +
	`fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|` +
	`(?:twenty|thirty)[- ](?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)`

// A pattern is one kind of narration. Each matches within a line, or
// across a line break (prose wraps; see scan).
type pattern struct {
	what string
	re   *regexp.Regexp
}

var patterns = []pattern{
	{"a session counted by an ordinal", regexp.MustCompile(`(?i)\b(?:` + ordinals + `)\s+(?:work\s+)?sessions?\b`)},
	{"a session counted by a number", regexp.MustCompile(`(?i)\b\d+(?:st|nd|rd|th)\s+(?:work\s+)?sessions?\b|\bsessions?\s+#?\d+\b`)},
	{"a session narrated", regexp.MustCompile(`(?i)\b(?:this|last|previous|next|later|earlier|work)\s+sessions?\b`)},
	{"a tracker's issue cited", regexp.MustCompile(`(?i)\bissues?\s+#?\d+\b`)},
	{"a tracker's pull request cited", regexp.MustCompile(`\bPR\s*#\d+\b|(?i)\bpull\s+requests?\s+#?\d+\b`)},
	// "#14" alone: in parentheses or brackets ("(#14)", "(#14, #22)"), not
	// a markdown link's target ("](#7-invariants)"), or after a word that
	// cites it ("see #14", "fixes #14"). A colour (#333, "#1a2b3c"), a
	// placeholder ($1) or a heading's anchor is none of these.
	{"a tracker's number cited", regexp.MustCompile(`(?i)(?:^|[^\]])([(\[]#\d+(?:,\s*#\d+)*[)\]]?)(?:[^\w-]|$)|` +
		`\b((?:see|fix|fixes|fixed|close|closes|closed|resolve|resolves|resolved|ref|refs|per|in|from|after|since|ticket|bug)\s+#\d+)(?:[^\w-]|$)`)},
}

// A finding is one narration found.
type finding struct {
	file   string
	line   int
	what   string
	phrase string
}

func (f finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %q", f.file, f.line, f.what, f.phrase)
}

// continuation strips what starts a wrapped line of prose or of a comment
// (indentation, "//", "--", "#", "*", ">"), for a phrase broken across two
// lines to be read as one.
func continuation(line string) string {
	line = strings.TrimLeft(line, " \t")
	for _, mark := range []string{"//", "--", "#", "*", ">"} {
		if rest, ok := strings.CutPrefix(line, mark); ok {
			return strings.TrimLeft(rest, " \t")
		}
	}
	return line
}

// phrase is what a match of re at at in text found: its first group
// that matched, when re has groups (the context around it left out), else
// the whole match.
func phrase(re *regexp.Regexp, text string, at []int) string {
	for g := 1; 2*g+1 < len(at); g++ {
		if at[2*g] >= 0 {
			return text[at[2*g]:at[2*g+1]]
		}
	}
	return strings.TrimSpace(text[at[0]:at[1]])
}

// cues are what every pattern's match holds, lowercased: a line without
// any of them is not run through the patterns.
var cues = []string{"session", "issue", "#", "pull"}

func cued(text string) bool {
	text = strings.ToLower(text)
	return slices.ContainsFunc(cues, func(c string) bool { return strings.Contains(text, c) })
}

// scan returns the narration in text, by line. A phrase that a line break
// splits (an ordinal at the end of one line, the word it counts at the
// start of the next) is reported at the line it ends on.
func scan(file, text string) []finding {
	lines := strings.Split(text, "\n")
	var found []finding
	for i, line := range lines {
		if !cued(line) && (i+1 == len(lines) || !cued(lines[i+1])) {
			continue
		}
		for _, p := range patterns {
			for _, at := range p.re.FindAllStringSubmatchIndex(line, -1) {
				found = append(found, finding{file, i + 1, p.what, phrase(p.re, line, at)})
			}
		}
		if i+1 == len(lines) {
			continue
		}
		joined := strings.TrimRight(line, " \t\r") + " "
		cut := len(joined)
		joined += continuation(lines[i+1])
		for _, p := range patterns {
			for _, at := range p.re.FindAllStringSubmatchIndex(joined, -1) {
				if at[0] < cut-1 && at[1] > cut {
					found = append(found, finding{file, i + 2, p.what, phrase(p.re, joined, at)})
				}
			}
		}
	}
	return found
}

// TestNoNarration: no text file git knows of (committed or not, but not
// ignored) narrates working sessions or cites a tracker's numbers.
func TestNoNarration(t *testing.T) {
	t.Parallel()
	var found []finding
	scanned := 0
	for _, name := range gitFiles(t) {
		if name == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			continue // not text
		}
		scanned++
		found = append(found, scan(name, string(b))...)
	}
	if scanned == 0 {
		t.Fatal("no text file scanned: is .. the repository's root?")
	}
	for _, f := range found {
		t.Errorf("%s: write what holds now (git log keeps the history)", f)
	}
}

// TestNarrationPatterns: the patterns catch narration and tracker numbers,
// and leave the technical "session" and the other uses of "#" alone.
func TestNarrationPatterns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want bool
	}{
		// Narration.
		{"## 2026-11-28 (twenty-first ~), 9ec0c75 on another VM", true},
		{"the twentieth ~'s VM was slower", true},
		{"as in the sixteenth ~.", true},
		{"the ninth to eleventh ~s", true},
		{"measured in the Twenty First ~", true},
		{"on the thirtieth ~", true},
		{"the first ~ found it", true},
		{"see ~ 21 for the figures", true},
		{"~s 9 and 11 disagree", true},
		{"the 21st ~'s runs", true},
		{"in the 3rd ~", true},
		{"This ~ measured 0.188", true},
		{"the figures of the last ~", true},
		{"as the previous ~ found", true},
		{"left for the next ~", true},
		{"a later ~ dropped it", true},
		{"earlier ~s' ratios used it", true},
		{"one work ~ later", true},
		{"the seventh work ~", true},
		// Trackers.
		{"the floors of issue 14", true},
		{"issue 22's floors, tighter", true},
		{"after issue #14", true},
		{"(issues 15 to 17)", true},
		{"issues 14 and 22", true},
		{"Issue 24: the reaper", true},
		{"the reaper's pace (#24)", true},
		{"both (#14, #22)", true},
		{"see #14", true},
		{"fixes #22.", true},
		{"[#14] the hot path", true},
		{"merged in PR #31", true},
		{"pull request 12 moved it", true},
		// The technical session, and other numbers.
		{"DATABASE_SESSION_URL=postgres://127.0.0.1/payments", false},
		{"a session connection past the pooler", false},
		{"the session pool", false},
		{"session-mode PgBouncer", false},
		{"PgBouncer in session mode, or transaction mode", false},
		{"the presence lock held by a session of its own", false},
		{"a session advisory lock", false},
		{"goose holds a session lock while it migrates", false},
		{"another session holds the table locked", false},
		{"the lock's session ends when the worker dies", false},
		{"River's client runs on the session pool (at most 8 connections)", false},
		{"SELECT v FROM bench_ceiling WHERE id = $1", false},
		{"color: #333; background: #1a2b3c", false},
		{`"color": "#73BF69"`, false},
		{"[section 7](SPEC.md#7-invariants)", false},
		{"the contract ([`SPEC.md`](SPEC.md#7-invariants))", false},
		{"## 7. Invariants", false},
		{"# 14 retries at most", false},
		{"attempt 14 of the delivery", false},
		{"it issues one statement at a time", false},
		{"no issue with 4 clients", false},
		{"the 30th of November", false},
	} {
		t.Run(c.text, func(t *testing.T) {
			found := scan("sample", spell(c.text))
			if got := len(found) > 0; got != c.want {
				t.Errorf("%q: flagged %t (%v), want %t", c.text, got, found, c.want)
			}
		})
	}
}

// TestNarrationPhrase: a finding names the phrase alone, without the
// character the pattern read before it.
func TestNarrationPhrase(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		`the reaper's pace "(#24)"`:        "(#24)",
		"both ((#14, #22))":                "(#14, #22)",
		"see #14, then":                    "see #14",
		"as in the nineteenth ~.":          "nineteenth ~",
		"the floors of issue #22's bounds": "issue #22",
	} {
		found := scan("sample", spell(text))
		if len(found) != 1 || found[0].phrase != spell(want) {
			t.Errorf("%q: found %v, want the one phrase %q", text, found, want)
		}
	}
}

// TestNarrationAcrossLines: a phrase that wraps is caught at the line it
// ends on, in prose and in comments; two lines that only meet are not.
func TestNarrationAcrossLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text  string
		lines []int
	}{
		{"as in the sixteenth\n  ~. At 4 clients", []int{2}},
		{"// measured in the nineteenth\n// ~, by pgbench", []int{2}},
		{"-- with no rules at all (docs/BENCHMARKS.md, nineteenth\n-- ~). Each", []int{2}},
		{"the floors of issue\n22 and more", []int{2}},
		{"the twentieth ~\nand the twenty-first ~", []int{1, 2}},
		{"a connection of its own for this\nwork: a session past the pooler", nil},
		{"the pool for what needs a\nsession of its own", nil},
	} {
		var lines []int
		for _, f := range scan("sample", spell(c.text)) {
			lines = append(lines, f.line)
		}
		if !slices.Equal(lines, c.lines) {
			t.Errorf("%q: found at lines %v, want %v", c.text, lines, c.lines)
		}
	}
}

// spell writes out a sample of narration, in which "~" stands for the word
// it narrates with, so that this file narrates nothing itself.
func spell(sample string) string { return strings.ReplaceAll(sample, "~", "session") }

// gitFiles lists the regular files git knows of in the repository, committed
// or not, but not ignored, and not deleted in the working tree; their names
// are relative to its root, with slashes.
func gitFiles(t *testing.T) []string {
	t.Helper()
	list := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	list.Dir = ".."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join("..", filepath.FromSlash(name)))
		if err == nil && info.Mode().IsRegular() {
			files = append(files, name)
		}
	}
	return files
}

// references are the documents that are reference, read as what holds now:
// no figure in them is dated, tied to a commit, or set against another
// machine's, and no aside tells how the text or the code got here. How a
// figure moved goes in the message of the commit that moved it.
var references = []string{"docs/SPEC.md", "docs/CHAOS.md", "docs/BENCHMARKS.md"}

// months are the month names a dated figure is narrated with.
const months = `January|February|March|April|May|June|July|August|September|October|November|December`

// hexWord is what may be a commit's hash: 7 to 40 hexadecimal digits, at
// least one of them a digit and one a letter (a number or a word is none).
var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// hashCue is a word near a hash that says it names a commit.
var hashCue = regexp.MustCompile(`(?i)\b(?:commits?|code|hash|sha|revision|rev|run|runs|measured|on)\b`)

// historyPatterns are the other kinds of history in a reference.
var historyPatterns = []pattern{
	{"a date", regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b`)},
	{"a month with its year", regexp.MustCompile(`(?i)\b(?:\d{1,2}(?:st|nd|rd|th)?\s+)?(?:` + months + `)\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?20\d\d\b`)},
	{"an origin told", regexp.MustCompile(`(?i)\b(?:it|this|the \w+) (?:began|started|started out) as\b`)},
	{"an aside on the code against the text", regexp.MustCompile(`(?i)\bthe code (?:deliberately )?(?:differs|goes further)\b`)},
	{"one VM's figures set against another's", regexp.MustCompile(`(?i)\bon (?:one|a|the same|this) (?:[\w-]+ )?VM\b(?:[^.]|\.\d)*\bon another\b|\banother (?:[\w-]+ )?VM\b|\bon a [\w-]+ VM (?:where|whose)\b`)},
	{"a dated section", regexp.MustCompile(`(?i)\btoday's (?:figures|results|numbers)\b`)},
}

// codeSpan is text in backticks: a value (a version named by its date, an
// API's), not a date the prose is written on.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// scanHistory returns the history in text, a reference, by line; isCommit
// says whether a hexadecimal word is a commit the repository knows.
func scanHistory(file, text string, isCommit func(string) bool) []finding {
	var found []finding
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		prose := codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, at := range hexWord.FindAllStringIndex(line, -1) {
			w := line[at[0]:at[1]]
			if !strings.ContainsAny(w, "0123456789") || !strings.ContainsAny(w, "abcdef") {
				continue
			}
			near := line[max(0, at[0]-40):min(len(line), at[1]+40)]
			alone := at[0] > 0 && at[1] < len(line) && line[at[0]-1] == '(' && line[at[1]] == ')'
			if hashCue.MatchString(near) || alone || isCommit(w) {
				found = append(found, finding{file, i + 1, "a commit's hash", w})
			}
		}
		joined := prose
		if i+1 < len(lines) {
			joined += " " + continuation(codeSpan.ReplaceAllString(lines[i+1], " "))
		}
		for _, p := range historyPatterns {
			for _, at := range p.re.FindAllStringIndex(joined, -1) {
				if at[0] < len(prose) { // a match that starts on the next line is found there
					found = append(found, finding{file, i + 1, p.what, strings.TrimSpace(joined[at[0]:at[1]])})
				}
			}
		}
	}
	return found
}

// knownCommits returns whether git knows each hexadecimal word of texts as
// a commit, asked in one batch.
func knownCommits(t *testing.T, texts []string) func(string) bool {
	t.Helper()
	var words []string
	for _, text := range texts {
		for _, w := range hexWord.FindAllString(text, -1) {
			if !slices.Contains(words, w) {
				words = append(words, w)
			}
		}
	}
	known := map[string]bool{}
	if len(words) > 0 {
		var in bytes.Buffer
		for _, w := range words {
			fmt.Fprintf(&in, "%s^{commit}\n", w)
		}
		check := exec.Command("git", "cat-file", "--batch-check=%(objecttype)")
		check.Dir = ".."
		check.Stdin = &in
		out, err := check.Output()
		if err != nil {
			t.Fatalf("git cat-file: %v", err)
		}
		for i, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if i < len(words) && line == "commit" {
				known[words[i]] = true
			}
		}
	}
	return func(w string) bool { return known[w] }
}

// TestReferenceWithoutHistory: SPEC, CHAOS and BENCHMARKS say what holds
// now: no commit's hash, no date, no "it began as", no aside that the code
// differs from the text or goes further, no figures of one VM set against
// another's.
func TestReferenceWithoutHistory(t *testing.T) {
	t.Parallel()
	texts := make([]string, len(references))
	for i, name := range references {
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = string(b)
	}
	isCommit := knownCommits(t, texts)
	for i, name := range references {
		for _, f := range scanHistory(name, texts[i], isCommit) {
			t.Errorf("%s: write what holds now (the commit that moved it keeps the history)", f)
		}
	}
}

// TestHistoryPatterns: the patterns catch a reference's history, and leave
// its values alone (a seed, a count, a version named by its date in code).
func TestHistoryPatterns(t *testing.T) {
	t.Parallel()
	commit := func(w string) bool { return w == "5d90343" }
	for _, c := range []struct {
		text string
		want bool
	}{
		{"Five runs of make bench on service code 9ec0c75, one after another", true},
		{"PASSED, 18 of 18, on commit cc40a40", true},
		{"At a million keys (10ae128), with the worker's pace", true},
		{"as 5d90343 measured", true},
		{"PASSED, 19 of 19, twice, 2026-11-29", true},
		{"measured in November 2026", true},
		{"on 28 November 2026", true},
		{"on November 28, 2026, on one machine", true},
		{"This is the contract. It began as `../shared/SPEC.md` and now lives here", true},
		{"422. The code differs: the path is the request's actual path", true},
		{"the text says so (\"The code goes further\")", true},
		{"it reads 0.60 on one VM and 0.86 on another", true},
		{"On a 2-core VM where the same code costs 5.7 ms a payment", true},
		{"the same run on another VM", true},
		{"## Today's figures", true},
		// Values, not history.
		{"`CHAOS_SEED=20261207 make chaos`", false},
		{"2000000 finished keys in the table", false},
		{"API versions before `2022-11-15`", false},
		{"the default 32 clients, 10 s a mode", false},
		{"a noisy, shared VM", false},
		{"the 30th of November", false},
		{"a decade of keys", false},
		{"`sha256:0123abcdef` is not near a cue", false},
		{"the id ch_81c9bd01ad2a346661b53095 of a charge", false},
	} {
		t.Run(c.text, func(t *testing.T) {
			found := scanHistory("sample", c.text, commit)
			if got := len(found) > 0; got != c.want {
				t.Errorf("%q: flagged %t (%v), want %t", c.text, got, found, c.want)
			}
		})
	}
}
