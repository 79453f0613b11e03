package zkserver

import "syscall"

// sysProcAttr puts the JVM in its own process group (a Ctrl-C aimed at the
// program does not reach it directly) and has the kernel SIGKILL it when the
// thread that started it dies. Go keeps its threads until the process ends
// (unless a goroutine exits while locked to one), so that is when this
// process exits, however it exits: a panic, a -timeout, a signal, SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
