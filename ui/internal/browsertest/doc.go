// Package browsertest runs the ui package's pages in a real headless
// Chromium, on memstore and on PostgreSQL. It is a module of its own so
// that the browser driver is never a dependency of the ui module.
package browsertest
