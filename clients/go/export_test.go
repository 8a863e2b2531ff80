package redlockd

// Hooks for the package's external tests.

// BackgroundReleases is how many background releases of unanswered
// Acquires c has started.
func BackgroundReleases(c *Client) int64 { return c.releases.count() }

// DerivedToken is the token the daemon derives from a request id.
func DerivedToken(resource, requestID string) string { return derivedToken(resource, requestID) }
