package protocol

// LoggingLevel is an RFC 5424 severity as used by logging/setLevel and
// notifications/message.
type LoggingLevel string

// The eight levels, least severe first.
const (
	LevelDebug     LoggingLevel = "debug"
	LevelInfo      LoggingLevel = "info"
	LevelNotice    LoggingLevel = "notice"
	LevelWarning   LoggingLevel = "warning"
	LevelError     LoggingLevel = "error"
	LevelCritical  LoggingLevel = "critical"
	LevelAlert     LoggingLevel = "alert"
	LevelEmergency LoggingLevel = "emergency"
)

// Severity orders levels: higher is more severe; unknown levels are -1.
func (l LoggingLevel) Severity() int {
	switch l {
	case LevelDebug:
		return 0
	case LevelInfo:
		return 1
	case LevelNotice:
		return 2
	case LevelWarning:
		return 3
	case LevelError:
		return 4
	case LevelCritical:
		return 5
	case LevelAlert:
		return 6
	case LevelEmergency:
		return 7
	}
	return -1
}

// Valid reports whether l is one of the eight levels.
func (l LoggingLevel) Valid() bool { return l.Severity() >= 0 }

// Allows reports whether a message at level msg passes a threshold of l.
func (l LoggingLevel) Allows(msg LoggingLevel) bool { return msg.Severity() >= l.Severity() }
