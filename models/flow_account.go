package models

// FlowAccount is a row of kubun_connector_flow_account: the flow control
// of one provider account (ConnectorName, AccountKey), or with AccountKey
// "" of a whole connector (the limits that sit above its accounts: the
// provider's app quota). Its limits are set by an operator or the
// application and read by every claim; its state (pause, rate, live cap,
// when it can next be served) is kept by the claims and the writes that
// finish its operations. A nil limit is no limit.
type FlowAccount struct {
	ConnectorName string `gorm:"column:connector_name;primaryKey;index:kubun_connector_flow_account_eligible_idx,priority:2"`
	AccountKey    string `gorm:"column:account_key;primaryKey;index:kubun_connector_flow_account_eligible_idx,priority:3"`
	// MaxInFlight caps the account's live leases, across every instance.
	MaxInFlight *int64 `gorm:"column:max_in_flight;type:bigint"`
	// Rate, PeriodMillis and Burst limit the account's starts: at most
	// Rate per period over time, at most Burst at once.
	Rate         *int64 `gorm:"column:rate;type:bigint"`
	PeriodMillis *int64 `gorm:"column:period_ms;type:bigint"`
	Burst        *int64 `gorm:"column:burst;type:bigint"`
	// Adaptive makes the cap a live one (LiveCap): halved on a provider's
	// throttling answer, grown by one after GrowAfter successes, up to
	// MaxInFlight.
	Adaptive  bool   `gorm:"column:adaptive;type:boolean;not null;default:false"`
	GrowAfter *int64 `gorm:"column:grow_after;type:bigint"`
	// Fair (on a connector's row) puts every account of the connector
	// under flow control with no limit of its own: claims share their limit
	// among the accounts with due work.
	Fair bool `gorm:"column:fair;type:boolean;not null;default:false"`
	// Ordered (on a connector's row) brings every account of the connector
	// under flow control and claims a document's operations one at a
	// time, in record order.
	Ordered bool `gorm:"column:ordered;type:boolean;not null;default:false"`
	// HoldAccount and HoldUntil, on a connector's row (migration 0021),
	// keep the connector's rate for one of its accounts whose next
	// operation weighs more than the rate has room for yet: until
	// HoldUntil (epoch ms) no other account spends it, so their backlog
	// cannot take the room that operation waits for. nil when none.
	HoldAccount *string `gorm:"column:hold_account"`
	HoldUntil   *int64  `gorm:"column:hold_until;type:bigint"`
	// PausedUntil is when a pause ends (epoch ms); nil when not paused.
	PausedUntil    *int64 `gorm:"column:paused_until;type:bigint"`
	LiveCap        *int64 `gorm:"column:live_cap;type:bigint"`
	Successes      int64  `gorm:"column:successes;type:bigint;not null;default:0"`
	LastDecreaseAt *int64 `gorm:"column:last_decrease_at;type:bigint"`
	// TatMicros is the rate limit's theoretical arrival time (GCRA), epoch
	// microseconds.
	TatMicros int64 `gorm:"column:tat_us;type:bigint;not null;default:0"`
	// EligibleAt is the earliest time a claim looks at the account (epoch
	// ms): later while it is paused, at its cap, out of tokens or without
	// due work; moved earlier by the writes that change that.
	EligibleAt int64 `gorm:"column:eligible_at;type:bigint;not null;default:0;index:kubun_connector_flow_account_eligible_idx,priority:1,where:account_key <> ''"`
	UpdatedAt  int64 `gorm:"column:updated_at;type:bigint;not null;default:0;autoCreateTime:false;autoUpdateTime:false"`
}

// TableName returns the table name.
func (FlowAccount) TableName() string { return "kubun_connector_flow_account" }
