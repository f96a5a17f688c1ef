//go:build !race

package e2e

// raceBuild makes the binary under test a -race build when the tests are.
const raceBuild = false
