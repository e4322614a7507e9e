package release

import "github.com/nodegroup-io/nodegroup-operator/internal/gobuild"

// Platform is a GOOS/GOARCH pair a binary is built for.
type Platform = gobuild.Platform

// ImagePlatforms are the platforms of the operator image's index.
var ImagePlatforms = []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}

// PluginPlatforms are the platforms the kubectl plugin is released for.
var PluginPlatforms = []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}
