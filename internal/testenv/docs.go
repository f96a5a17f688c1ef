package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Block is a fenced code block of a Markdown document.
type Block struct {
	File string // the document's path, from the repository's root
	Line int    // the line of its opening fence, from 1
	Text string // its content, each line ending in "\n"
}

func (b Block) String() string { return b.File + ":" + strconv.Itoa(b.Line) }

// DocBlocks returns the code blocks fenced as ```lang in the repository's Markdown
// documents named by patterns (filepath.Glob patterns from the repository's root,
// "docs/*.md"), in the order of the files and of their lines. A block without its
// closing fence fails the test.
func DocBlocks(t testing.TB, lang string, patterns ...string) []Block {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	var blocks []Block
	for _, p := range patterns {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || len(files) == 0 {
			t.Fatalf("no document matches %s (%v)", p, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			var open *Block
			for i, line := range strings.SplitAfter(string(b), "\n") {
				fence, isFence := strings.CutPrefix(strings.TrimRight(line, "\n"), "```")
				switch {
				case open == nil && isFence && fence == lang:
					open = &Block{File: filepath.ToSlash(rel), Line: i + 1}
				case open != nil && isFence && fence == "":
					blocks = append(blocks, *open)
					open = nil
				case open != nil:
					open.Text += line
				}
			}
			if open != nil {
				t.Fatalf("%s: the block opened here is not closed", open)
			}
		}
	}
	return blocks
}
