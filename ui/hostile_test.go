package ui

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jobstate/jobstate/ui/internal/uitest"
)

// scriptRE finds every script element a page holds.
var scriptRE = regexp.MustCompile(`(?i)<script[^>]*>`)

func TestHostileStringsRenderInert(t *testing.T) {
	f := newFixture(t, 0, Options{Authorize: allowAll})
	pages := []string{
		"/jobs",
		"/jobs?owner=" + strings.ReplaceAll(uitest.HostileOwner, "<", "%3C"),
		"/jobs/" + f.jobs.Script.String(),
		"/jobs/" + f.jobs.Img.String(),
		"/jobs/" + f.jobs.Failed.String(),
		"/jobs?machine=%3Cscript%3Ealert(1)%3C/script%3E",
	}
	for _, p := range pages {
		_, body, _ := f.get(p)
		mustNotContain(t, body, "<script>window.pwned", "<img src=x", "</textarea><script>", `onerror="window`)
		for _, s := range scriptRE.FindAllString(body, -1) {
			if s != `<script src="/static/overview.js">` {
				t.Errorf("%s: a script element %q", p, s)
			}
		}
	}
	_, body, _ := f.get("/jobs/" + f.jobs.Script.String())
	mustContain(t, body, "&lt;script&gt;window.pwned=1&lt;/script&gt;",
		"&lt;/textarea&gt;&lt;script&gt;window.pwned=1&lt;/script&gt;&#39;&#34;")
	_, body, _ = f.get("/jobs/" + f.jobs.Img.String())
	mustContain(t, body, "&#34;&gt;&lt;img src=x onerror=&#34;window.pwned=1&#34;&gt;")
}

func TestBinaryPayloadShownAsHex(t *testing.T) {
	f := newFixture(t, 0, Options{})
	code, body, _ := f.get("/jobs/" + f.jobs.Binary.String())
	if code != http.StatusOK {
		t.Fatal(code)
	}
	mustContain(t, body, "7 bytes, not UTF-8: shown in hex.", `<pre class="hex">00000000  ff fe 00 3c 73 3e 80`, "|...&lt;s&gt;.|")
	mustNotContain(t, body, "\x00", "\xff")
}

func TestBigPayloadIsCutWithItsLengthStated(t *testing.T) {
	f := newFixture(t, 0, Options{PayloadLimit: 1000})
	code, body, _ := f.get("/jobs/" + f.jobs.Big.String())
	if code != http.StatusOK {
		t.Fatal(code)
	}
	mustContain(t, body, "1048576 bytes; the first 1000 shown.", "&lt;b&gt;x&lt;/b&gt;")
	if len(body) > 64<<10 {
		t.Fatalf("the page is %d bytes", len(body))
	}
}

func TestViewBytes(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		text  string
		hex   bool
		cut   bool
	}{
		{"héllo", 2, "h", false, true},
		{"héllo", 3, "hé", false, true},
		{"a\x00b", 10, "a\x00b", false, false},
		{"\xffab", 2, "00000000  ff 61                                             |.a|\n", true, true},
		{"", 10, "", false, false},
	}
	for _, c := range cases {
		v := viewBytes([]byte(c.in), c.limit)
		if v.Text != c.text || v.Hex != c.hex || v.Cut != c.cut || v.Len != len(c.in) {
			t.Errorf("viewBytes(%q, %d) = %+v", c.in, c.limit, v)
		}
	}
}

func TestNULInTextRendersAsReplacement(t *testing.T) {
	f := newFixture(t, 0, Options{})
	def, _ := f.env.Engine.Machine("queue")
	_ = def
	c, err := f.env.Engine.Create(f.env.Ctx, jobCreate("a\x00<b>"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := f.get("/jobs/" + c.Job.ID.String())
	mustNotContain(t, body, "\x00", "<b>")
	mustContain(t, body, "&lt;b&gt;")
}
