package conformancetest_test

import "github.com/jobstate/jobstate/sqlitestore/internal/sqlitetest"

// open and openAt open stores on files, closed when the test ends.
var (
	open   = sqlitetest.Open
	openAt = sqlitetest.OpenAt
)
