/// The version both programs (`kiosk` and `kiosk-server`) print with `--version`, and the
/// compiler that built them: one number for the pair, since they are released together.
public enum ProgramVersion {
    public static let number = "0.1.0"

    /// The compiler that built this program.
    public static var swift: String {
        #if compiler(>=6.4)
        return "6.4 or later"
        #elseif compiler(>=6.3)
        return "6.3"
        #elseif compiler(>=6.2)
        return "6.2"
        #elseif compiler(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }
}
