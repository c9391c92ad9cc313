// Package browsertest drives the dashboard in a real browser: Debian's
// headless chromium through the DevTools protocol (chromedp). It is a
// module of its own so that the root module does not carry chromedp.
package browsertest
