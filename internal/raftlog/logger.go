package raftlog

import (
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
)

// Logger sends etcd raft's log lines to l (its info lines at debug level).
func Logger(l *slog.Logger) raft.Logger { return slogRaft{l} }

type slogRaft struct{ l *slog.Logger }

func (r slogRaft) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r slogRaft) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r slogRaft) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r slogRaft) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r slogRaft) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r slogRaft) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r slogRaft) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r slogRaft) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r slogRaft) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r slogRaft) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (r slogRaft) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r slogRaft) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
