fn main() -> std::process::ExitCode {
    agentd::cli::run::main()
}
