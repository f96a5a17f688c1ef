//go:build race

package sidecartest

// RaceBuild makes the binary under test a -race build when the tests are.
const RaceBuild = true
