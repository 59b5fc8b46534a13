package host

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHCLog adapts a zap logger to hclog, so go-plugin's own messages and
// the lines a plugin writes to stderr land in Caddy's logs.
type zapHCLog struct {
	hclog.Logger // a null logger supplies the methods go-plugin does not use
	z            *zap.Logger
	name         string
	implied      []any
}

func newHCLog(z *zap.Logger) hclog.Logger {
	return &zapHCLog{Logger: hclog.NewNullLogger(), z: z}
}

func (l *zapHCLog) fields(args []any) []zap.Field {
	all := append(append([]any{}, l.implied...), args...)
	fs := make([]zap.Field, 0, len(all)/2)
	for i := 0; i+1 < len(all); i += 2 {
		fs = append(fs, zap.Any(fmt.Sprint(all[i]), all[i+1]))
	}
	return fs
}

func (l *zapHCLog) Log(level hclog.Level, msg string, args ...any) {
	var zl zapcore.Level
	switch level {
	case hclog.Trace, hclog.Debug:
		zl = zapcore.DebugLevel
	case hclog.Warn:
		zl = zapcore.WarnLevel
	case hclog.Error:
		zl = zapcore.ErrorLevel
	default:
		zl = zapcore.InfoLevel
	}
	if c := l.z.Check(zl, msg); c != nil {
		c.Write(l.fields(args)...)
	}
}

func (l *zapHCLog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *zapHCLog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *zapHCLog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *zapHCLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *zapHCLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }
func (l *zapHCLog) IsTrace() bool                 { return false }
func (l *zapHCLog) IsDebug() bool                 { return l.z.Core().Enabled(zapcore.DebugLevel) }
func (l *zapHCLog) IsInfo() bool                  { return l.z.Core().Enabled(zapcore.InfoLevel) }
func (l *zapHCLog) IsWarn() bool                  { return l.z.Core().Enabled(zapcore.WarnLevel) }
func (l *zapHCLog) IsError() bool                 { return true }
func (l *zapHCLog) ImpliedArgs() []any            { return l.implied }
func (l *zapHCLog) Name() string                  { return l.name }

func (l *zapHCLog) With(args ...any) hclog.Logger {
	c := *l
	c.implied = append(append([]any{}, l.implied...), args...)
	return &c
}

func (l *zapHCLog) Named(name string) hclog.Logger {
	c := *l
	c.z = l.z.Named(name)
	c.name = name
	return &c
}

func (l *zapHCLog) ResetNamed(name string) hclog.Logger { return l.Named(name) }
