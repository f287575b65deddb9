fn main() -> std::process::ExitCode {
    agentd::daemon::main()
}
