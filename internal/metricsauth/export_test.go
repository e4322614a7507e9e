package metricsauth

import (
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// NewReviewerWithClock is a Reviewer whose answers expire by clk.
func NewReviewerWithClock(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, clk clock.PassiveClock) *Reviewer {
	return newReviewer(tokens, access, clk)
}
