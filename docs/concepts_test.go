package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// concepts is the page that explains the idea, drawn.
const concepts = "CONCEPTS.md"

// mermaidBlocks returns the ```mermaid blocks of a document, each with the
// line its first line of diagram is on.
func mermaidBlocks(t *testing.T, doc string) []diagram {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []diagram
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```mermaid" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: a mermaid block is never closed", doc, start)
		}
		blocks = append(blocks, diagram{line: start + 1, text: strings.Join(lines[start:i], "\n")})
	}
	return blocks
}

// A diagram is one Mermaid block of a document.
type diagram struct {
	line int // of its first line in the document
	text string
}

// The shapes of a diagram's lines that the structural check reads.
var (
	stateArrow   = regexp.MustCompile(`^(\[\*\]|[A-Za-z_][\w]*)\s*-->\s*(\[\*\]|[A-Za-z_][\w]*)\s*(?::\s*(.*))?$`)
	stateOpen    = regexp.MustCompile(`^state\s+(?:"[^"]*"\s+as\s+)?([A-Za-z_]\w*)\s*\{$`)
	participant  = regexp.MustCompile(`^(?:participant|actor)\s+([A-Za-z_]\w*)(?:\s+as\s+(.+))?$`)
	message      = regexp.MustCompile(`^([A-Za-z_]\w*)\s*(?:->>|-->>|->|-->|-x|--x|-\)|--\))[+-]?\s*([A-Za-z_]\w*)\s*:\s*(.+)$`)
	note         = regexp.MustCompile(`^Note\s+(?:over|left of|right of)\s+([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))?\s*:\s*(.+)$`)
	blockOpen    = regexp.MustCompile(`^(?:alt|opt|loop|par|critical|break|rect)\b`)
	blockMiddle  = regexp.MustCompile(`^(?:else|and|option)\b`)
	diagramTypes = []string{"stateDiagram-v2", "stateDiagram", "sequenceDiagram"}
)

// checkDiagram checks what can be checked of a diagram without Mermaid: its
// type is one this repository draws, its blocks are balanced, every line is
// a shape the check knows, and it returns the names it draws (states,
// participants and their labels) for the caller to hold to the code.
func checkDiagram(text string) (names []string, problems []string) {
	lines := strings.Split(text, "\n")
	kind := strings.TrimSpace(lines[0])
	if !slices.Contains(diagramTypes, kind) {
		return nil, []string{fmt.Sprintf("line 1: %q is not a diagram type drawn here (%s)", kind, strings.Join(diagramTypes, ", "))}
	}
	declared := map[string]bool{}
	depth := 0
	for i, raw := range lines[1:] {
		line := strings.TrimSpace(raw)
		at := i + 2
		if line == "" || strings.HasPrefix(line, "%%") {
			continue
		}
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("line %d: %s", at, fmt.Sprintf(format, args...)))
		}
		if strings.Contains(line, ";") {
			// Mermaid ends a statement at a semicolon, even inside a label.
			bad("%q: a semicolon ends the statement, wherever it is", line)
			continue
		}
		if strings.HasPrefix(kind, "stateDiagram") {
			switch m := stateArrow.FindStringSubmatch(line); {
			case m != nil:
				for _, s := range m[1:3] {
					if s != "[*]" {
						names = append(names, s)
					}
				}
			case stateOpen.MatchString(line):
				names = append(names, stateOpen.FindStringSubmatch(line)[1])
				depth++
			case line == "}":
				depth--
			case strings.HasPrefix(line, "direction "), strings.HasPrefix(line, "note "), line == "end note":
			default:
				bad("%q is no state diagram line this check knows", line)
			}
		} else {
			if m := participant.FindStringSubmatch(line); m != nil {
				declared[m[1]] = true
				names = append(names, m[1])
				if m[2] != "" {
					names = append(names, strings.TrimSpace(m[2]))
				}
				continue
			}
			var ends []string
			switch {
			case message.MatchString(line):
				m := message.FindStringSubmatch(line)
				ends = m[1:3]
			case note.MatchString(line):
				m := note.FindStringSubmatch(line)
				ends = slices.DeleteFunc(m[1:3], func(s string) bool { return s == "" })
			case blockOpen.MatchString(line):
				depth++
			case blockMiddle.MatchString(line):
				if depth == 0 {
					bad("%q outside any block", line)
				}
			case line == "end":
				depth--
			case strings.HasPrefix(line, "autonumber"), strings.HasPrefix(line, "activate "), strings.HasPrefix(line, "deactivate "):
			default:
				bad("%q is no sequence diagram line this check knows", line)
			}
			for _, e := range ends {
				if !declared[e] {
					bad("%s is not a declared participant: declare each with participant, for its name to be checked", e)
				}
			}
		}
		if depth < 0 {
			bad("a block closed that was never opened")
			depth = 0
		}
	}
	if depth != 0 {
		problems = append(problems, fmt.Sprintf("%d block(s) left open", depth))
	}
	return names, problems
}

// readCode calls each with the text of every file of the service's code
// outside docs/ whose name keep accepts.
func readCode(keep func(name string) bool, each func(text []byte)) error {
	return filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && slices.Contains([]string{".git", "node_modules", "docs", "bin"}, d.Name()):
			return filepath.SkipDir
		case d.IsDir() || !keep(d.Name()):
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil {
			each(b)
		}
		return err
	})
}

// codeWords are the words of the service's code: its Go files (tests
// included, for the fixtures they name) and its migrations.
var codeWords = sync.OnceValues(func() (map[string]bool, error) {
	words := map[string]bool{}
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	err := readCode(func(name string) bool {
		return strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sql")
	}, func(text []byte) {
		for _, w := range word.FindAll(text, -1) {
			words[string(w)] = true
		}
	})
	return words, err
})

// codeLines are the lowercased lines of the service's Go code, tests left
// out: where the glossary's words must be used.
var codeLines = sync.OnceValues(func() ([]string, error) {
	var lines []string
	err := readCode(func(name string) bool {
		return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
	}, func(text []byte) {
		lines = append(lines, strings.Split(strings.ToLower(string(text)), "\n")...)
	})
	return lines, err
})

// inCode reports whether name is a word of the code, or a path in the tree.
func inCode(t *testing.T, name string) bool {
	t.Helper()
	words, err := codeWords()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(name, "/") {
		_, err := os.Stat(filepath.Join("..", filepath.FromSlash(name)))
		return err == nil
	}
	for _, part := range strings.Split(name, ".") {
		if !words[part] {
			return false
		}
	}
	return true
}

// TestConceptsDiagrams: every diagram of CONCEPTS.md is a state or
// sequence diagram whose blocks balance and whose lines are all shapes
// Mermaid draws, and every state and participant it names is a name the
// code uses (a recovery point, a status, a package, a table).
func TestConceptsDiagrams(t *testing.T) {
	t.Parallel()
	blocks := mermaidBlocks(t, concepts)
	var states, sequences int
	for _, d := range blocks {
		names, problems := checkDiagram(d.text)
		for _, p := range problems {
			t.Errorf("%s: the diagram at line %d: %s", concepts, d.line, p)
		}
		for _, n := range names {
			if !inCode(t, n) {
				t.Errorf("%s: the diagram at line %d names %q, which the code does not use", concepts, d.line, n)
			}
		}
		if strings.HasPrefix(d.text, "stateDiagram") {
			states++
		} else {
			sequences++
		}
	}
	if states == 0 || sequences < 6 {
		t.Errorf("%s draws %d state diagrams and %d sequence diagrams: want a key's states and a sequence for each case a client meets (replay, in flight, mismatch, tombstone, crash, fence)",
			concepts, states, sequences)
	}
	// The table of who moves each step names what the code calls it.
	b, err := os.ReadFile(concepts)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, row := range regexp.MustCompile("(?m)^\\| [^|]*→[^|]* \\|.*\\| ([^|]+) \\|$").FindAllStringSubmatch(string(b), -1) {
		steps++
		for _, n := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row[1], -1) {
			if !inCode(t, n[1]) {
				t.Errorf("%s: the steps' table names %s, which the code does not have", concepts, n[1])
			}
		}
	}
	if steps < 4 {
		t.Errorf("%s: the table of who moves each step has %d rows, want one a step", concepts, steps)
	}
	// The recovery points are drawn, every one the code declares.
	drawn := strings.Join(func() []string {
		var s []string
		for _, d := range blocks {
			s = append(s, d.text)
		}
		return s
	}(), "\n")
	for _, point := range []string{"started", "charge_created", "finished", "expired"} {
		if !regexp.MustCompile(`\b` + point + `\b`).MatchString(drawn) {
			t.Errorf("%s: no diagram draws the recovery point %s", concepts, point)
		}
	}
}

// TestConceptsDiagramCheck: the structural check refuses what Mermaid would.
func TestConceptsDiagramCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		ok         bool
	}{
		{"State", "stateDiagram-v2\n    [*] --> started: first phase\n    started --> finished", true},
		{"Sequence", "sequenceDiagram\n    participant api\n    participant worker\n    api->>worker: a job\n    alt ok\n        worker-->>api: done\n    else not\n        worker--xapi: lost\n    end", true},
		{"UnknownType", "flowchart LR\n    a --> b", false},
		{"Unbalanced", "sequenceDiagram\n    participant api\n    alt ok\n    api->>api: x", false},
		{"StrayEnd", "sequenceDiagram\n    participant api\n    end", false},
		{"Undeclared", "sequenceDiagram\n    participant api\n    api->>worker: a job", false},
		{"NotALine", "stateDiagram-v2\n    started -> finished", false},
		{"Semicolon", "sequenceDiagram\n    participant api\n    api->>api: one; two", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := checkDiagram(c.text)
			if ok := len(problems) == 0; ok != c.ok {
				t.Errorf("accepted %t (%v), want %t", ok, problems, c.ok)
			}
		})
	}
}

// TestConceptsDiagramsParse: Mermaid's own parser, run by Node under jsdom
// (docs/mermaid), parses every diagram of CONCEPTS.md. It skips, saying so,
// without Node or without the parser installed (npm install --prefix
// docs/mermaid; .ci/run does).
func TestConceptsDiagramsParse(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: Mermaid's parser cannot run (the structural check, TestConceptsDiagrams, still does)")
	}
	if _, err := os.Stat(filepath.Join("mermaid", "node_modules", "mermaid", "package.json")); err != nil {
		t.Skip("Mermaid's parser is not installed: npm install --prefix docs/mermaid (.ci/run does)")
	}
	blocks := mermaidBlocks(t, concepts)
	texts := make([]string, len(blocks))
	for i, d := range blocks {
		texts[i] = d.text
	}
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "parse.mjs")
	cmd.Dir = "mermaid"
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	parsed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var i int
		switch {
		case strings.HasPrefix(line, "ok "):
			parsed++
		case strings.HasPrefix(line, "error ") && func() bool { _, e := fmt.Sscanf(line, "error %d:", &i); return e == nil }() && i < len(blocks):
			t.Errorf("%s: Mermaid cannot parse the diagram at line %d: %s", concepts, blocks[i].line, line)
		}
	}
	if parsed+len(blocks) == 0 || (err != nil && parsed == len(blocks)) || (err == nil && parsed != len(blocks)) {
		t.Errorf("node parse.mjs: %v: parsed %d of %d diagrams\n%s%s", err, parsed, len(blocks), out, stderr.String())
	}
}

// glossaryEntry is one entry of CONCEPTS.md's glossary:
// "- **word** (`Name`, `pkg.Name`): what it is."
var glossaryEntry = regexp.MustCompile("(?m)^- \\*\\*([^*]+)\\*\\* \\(([^)]*)\\):")

// glossaryTerms are the words the glossary must define.
var glossaryTerms = []string{"kind", "fence", "tombstone", "presence", "place", "line", "doorbell", "relay",
	"sweep", "settle path", "tarpit", "recovery point", "downstream key", "not sent"}

// TestGlossaryInCode: the glossary defines at least glossaryTerms; each
// word it defines is used in the code (its words together on one line of a
// Go file, in a comment or a name), and each name it points to is one the
// code uses.
func TestGlossaryInCode(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(concepts)
	if err != nil {
		t.Fatal(err)
	}
	_, glossary, ok := strings.Cut(string(b), "\n## Glossary\n")
	if !ok {
		t.Fatalf("%s has no section ## Glossary", concepts)
	}
	lines, err := codeLines()
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	for _, m := range glossaryEntry.FindAllStringSubmatch(glossary, -1) {
		term, refs := m[1], m[2]
		defined = append(defined, term)
		var words []*regexp.Regexp
		for _, w := range strings.Fields(strings.ToLower(term)) {
			words = append(words, regexp.MustCompile(`\b`+regexp.QuoteMeta(w)))
		}
		if !slices.ContainsFunc(lines, func(line string) bool {
			return !slices.ContainsFunc(words, func(w *regexp.Regexp) bool { return !w.MatchString(line) })
		}) {
			t.Errorf("%s: the glossary defines %q, which no line of the Go code uses", concepts, term)
		}
		names := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(refs, -1)
		if len(names) == 0 {
			t.Errorf("%s: the glossary's %q points to no name of the code", concepts, term)
		}
		for _, n := range names {
			if !inCode(t, n[1]) {
				t.Errorf("%s: the glossary's %q points to %s, which the code does not have", concepts, term, n[1])
			}
		}
	}
	for _, term := range glossaryTerms {
		if !slices.Contains(defined, term) {
			t.Errorf("%s: the glossary does not define %q", concepts, term)
		}
	}
}
