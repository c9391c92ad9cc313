package main

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/repository"
)

// accountArg reads CONNECTOR/ACCOUNT, as "accounts list" prints it (the
// CLI's one key format, keys.go); CONNECTOR/* (or CONNECTOR/) names the
// connector itself, and an account whose key is "*" prints quoted.
func accountArg(s string) (repository.AccountKey, error) {
	const what = "CONNECTOR/ACCOUNT (CONNECTOR/* for the connector)"
	conn, raw, err := splitKey(s, what)
	if err != nil || raw == "*" {
		return repository.AccountKey{ConnectorName: conn}, err
	}
	acct, err := readPart(raw)
	if err != nil {
		return repository.AccountKey{}, fmt.Errorf("%w: %q is not %s: its quoted account is not a Go string", errUsage, s, what)
	}
	return repository.AccountKey{ConnectorName: conn, AccountKey: acct}, nil
}

// accountText is an account's key as the CLI prints it: CONNECTOR/* for
// the connector itself.
func accountText(k repository.AccountKey) string {
	if k.AccountKey == "" {
		return quotePart(k.ConnectorName, true) + "/*"
	}
	if k.AccountKey == "*" {
		return quotePart(k.ConnectorName, true) + `/"*"`
	}
	return formatKey(k.ConnectorName, k.AccountKey)
}

func accountsListFlags(c *cli) {
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "only this connector")
	c.fs.BoolVar(&c.f.pausedOnly, "paused", false, "only paused accounts")
	c.fs.StringVar(&c.f.after, "after", "", "resume after CONNECTOR/ACCOUNT (printed under a full page)")
	c.fs.IntVar(&c.f.limit, "limit", 100, "page size (at most 1000)")
}

// accountView is one row of "accounts list" as JSON.
type accountView struct {
	Account      string  `json:"account"`
	MaxInFlight  int64   `json:"max_in_flight,omitempty"`
	LiveCap      int64   `json:"live_cap,omitempty"`
	Rate         int64   `json:"rate,omitempty"`
	PeriodSecs   float64 `json:"period_seconds,omitempty"`
	Burst        int64   `json:"burst,omitempty"`
	Adaptive     bool    `json:"adaptive,omitempty"`
	Fair         bool    `json:"fair,omitempty"`
	Ordered      bool    `json:"ordered,omitempty"`
	InFlight     int64   `json:"in_flight"`
	PausedUntil  *string `json:"paused_until,omitempty"`
	NextEligible *string `json:"next_eligible,omitempty"`
}

func accountsList(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	p := repository.ListAccountsParams{ConnectorName: c.f.connector, PausedOnly: c.f.pausedOnly, Limit: c.f.limit}
	if c.f.after != "" {
		k, err := accountArg(c.f.after)
		if err != nil {
			return err
		}
		p.After = &k
	}
	accounts, err := repo.ListAccounts(ctx, p)
	if err != nil {
		return err
	}
	views := make([]accountView, len(accounts))
	t := table{v: views, header: []string{"ACCOUNT", "CAP", "LIVE CAP", "RATE", "IN FLIGHT", "PAUSED UNTIL"}}
	for i, a := range accounts {
		v := accountView{Account: accountText(a.AccountKey), MaxInFlight: a.Limits.MaxInFlight, LiveCap: a.LiveCap,
			Rate: a.Limits.Rate, PeriodSecs: a.Limits.Period.Seconds(), Burst: a.Limits.Burst, Adaptive: a.Limits.Adaptive,
			Fair: a.Limits.Fair, Ordered: a.Limits.Ordered, InFlight: a.InFlight}
		paused := "-"
		if !a.PausedUntil.IsZero() {
			paused = a.PausedUntil.UTC().Format(time.RFC3339)
			v.PausedUntil = &paused
		}
		if a.EligibleAt.Year() < 3000 {
			next := a.EligibleAt.UTC().Format(time.RFC3339Nano)
			v.NextEligible = &next
		}
		views[i] = v
		rate := "-"
		if a.Limits.Rate > 0 {
			rate = fmt.Sprintf("%d/%v burst %d", a.Limits.Rate, a.Limits.Period, max(a.Limits.Burst, 1))
		}
		t.rows = append(t.rows, []string{v.Account, dash(a.Limits.MaxInFlight), dash(a.LiveCap), rate, itoa(a.InFlight), paused})
	}
	if err := c.print(t); err != nil {
		return err
	}
	if len(accounts) == c.f.limit && !c.json {
		_, err = fmt.Fprintf(c.stdout, "next page: -after %s\n", shellQuote(accountText(accounts[len(accounts)-1].AccountKey)))
	}
	return err
}

func dash(n int64) string {
	if n == 0 {
		return "-"
	}
	return itoa(n)
}

func accountsSetFlags(c *cli) {
	c.fs.Int64Var(&c.f.maxInFlight, "max-in-flight", 0, "at most this many leased at once (0: no cap)")
	c.fs.Int64Var(&c.f.rate, "rate", 0, "at most this many starts per -period (0: no rate limit)")
	c.fs.DurationVar(&c.f.period, "period", 0, "the rate's period, e.g. 1s")
	c.fs.Int64Var(&c.f.burst, "burst", 0, "at most this many starts at once (default 1, at most -rate)")
	c.fs.BoolVar(&c.f.adaptive, "adaptive", false, "lower the cap on throttling, grow it back on successes")
	c.fs.Int64Var(&c.f.growAfter, "grow-after", 0, "successes that grow an adaptive cap by one (default 10)")
	c.fs.BoolVar(&c.f.fair, "fair", false, "on CONNECTOR/*: share claims fairly among all its accounts")
	c.fs.BoolVar(&c.f.ordered, "ordered", false, "on CONNECTOR/*: one operation of a document at a time, in record order")
}

// accountRepo reads the command's CONNECTOR/ACCOUNT argument and opens the
// repository it acts on.
func accountRepo(c *cli) (repository.AccountKey, *repository.Repository, error) {
	k, err := accountArg(c.positional[0])
	if err != nil {
		return k, nil, err
	}
	repo, err := c.repo()
	return k, repo, err
}

func accountsSet(ctx context.Context, c *cli) error {
	k, repo, err := accountRepo(c)
	if err != nil {
		return err
	}
	l := repository.AccountLimits{MaxInFlight: c.f.maxInFlight, Rate: c.f.rate, Period: c.f.period, Burst: c.f.burst,
		Adaptive: c.f.adaptive, GrowAfter: c.f.growAfter, Fair: c.f.fair, Ordered: c.f.ordered}
	if err := repo.SetAccountLimits(ctx, k, l); err != nil {
		return err
	}
	return c.message(map[string]any{"account": accountText(k), "set": true}, fmt.Sprintf("limits of %s set", accountText(k)))
}

func accountsPauseFlags(c *cli) {
	c.fs.DurationVar(&c.f.until, "for", 0, "how long to pause (required), e.g. 10m")
}

func accountsPause(ctx context.Context, c *cli) error {
	if c.f.until <= 0 {
		return fmt.Errorf("%w: accounts pause needs -for, a positive duration", errUsage)
	}
	k, repo, err := accountRepo(c)
	if err != nil {
		return err
	}
	until := repo.Now().Add(c.f.until)
	if err := repo.PauseAccount(ctx, k, until); err != nil {
		return err
	}
	return c.message(map[string]any{"account": accountText(k), "paused_until": until.UTC().Format(time.RFC3339)},
		fmt.Sprintf("%s paused until %s", accountText(k), until.UTC().Format(time.RFC3339)))
}

func accountsResume(ctx context.Context, c *cli) error {
	k, repo, err := accountRepo(c)
	if err != nil {
		return err
	}
	if err := repo.ResumeAccount(ctx, k); err != nil {
		return err
	}
	return c.message(map[string]any{"account": accountText(k), "resumed": true}, fmt.Sprintf("%s resumed", accountText(k)))
}
