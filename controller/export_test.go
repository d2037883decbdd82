package controller

// Test-only access to the pure core for the external test package.
var (
	DesiredPodForTest   = desiredPod
	TemplateHashForTest = templateHash
)
