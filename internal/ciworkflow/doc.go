// Package ciworkflow holds the tests of the project's forge workflows
// (.github/workflows): they are linted with actionlint, as the forge would run them.
package ciworkflow
