package conformancetest_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// raceChecks is the number of cases each rapid property test draws under
// the race detector (rapid's default, 100, otherwise): every case opens a
// database file and migrates it, which the race detector makes several
// times slower. -rapid.checks, when given, wins.
const raceChecks = 20

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	if raceEnabled && !given {
		if err := flag.Set("rapid.checks", strconv.Itoa(raceChecks)); err != nil {
			fmt.Fprintln(os.Stderr, "setting -rapid.checks:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
