/* A stand-in python.exe for the Wine smoke test (scripts/test-windows.sh): enough of an
 * interpreter for the server's start-up questions, then runs that show what the server did.
 *
 *   python --version      "Python 3.12.0" (the server's start-up check: Python 3.8 or later);
 *   python -c CODE        answers what the server asks: its own path (sys.executable), its
 *                         version and the trees it reads (the sandbox's probe), "unsupported"
 *                         to the bytecode fill (no cache to make);
 *   python SCRIPT ARGS    prints "ARGV <arg>" for each argument, then the script's lines, and
 *                         obeys the script's directives, one per line:
 *                           #standin exit N      exit with N (after everything else)
 *                           #standin child FILE  start a child (CreateProcess) that writes a
 *                                                counter into FILE (relative to the current
 *                                                folder) every 100 ms, for at most 60 s
 *                           #standin sleep S     sleep S seconds
 *   python --heartbeat FILE  that child.
 *
 * Anything else is refused with exit 2 and noted in unanswered.txt beside it (see unanswered),
 * so a new start-up question shows up by name.
 *
 * It also builds for Linux (the few platform calls sit behind PLATFORM_* below): the server's
 * contract test (server/tests/standin.rs) starts the real server with it, so a start-up
 * question it cannot answer fails `cargo test` instead of only this Wine smoke.
 *
 * Never shipped: real Python is what users run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#define PATH_MAX_LEN MAX_PATH
#define SEPARATOR '\\'
static void sleep_ms(unsigned ms) { Sleep(ms); }
/* Its own path, as Windows names it. */
static void own_path(char *buf, size_t size) { GetModuleFileNameA(NULL, buf, (DWORD)size); }
/* Starts `self --heartbeat file` without waiting for it; its pid, or 0 after saying why. */
static unsigned long spawn_heartbeat(const char *self, const char *file)
{
    char line[2 * MAX_PATH + 32];
    STARTUPINFOA si = {sizeof si};
    PROCESS_INFORMATION pi;
    snprintf(line, sizeof line, "\"%s\" --heartbeat \"%s\"", self, file);
    if (!CreateProcessA(self, line, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
        fprintf(stderr, "CreateProcess failed: %lu\n", GetLastError());
        return 0;
    }
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    return pi.dwProcessId;
}
#else
#include <limits.h>
#include <time.h>
#include <unistd.h>
#define PATH_MAX_LEN PATH_MAX
#define SEPARATOR '/'
static void sleep_ms(unsigned ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}
static void own_path(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    buf[n > 0 ? n : 0] = '\0';
}
static unsigned long spawn_heartbeat(const char *self, const char *file)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 0;
    }
    if (pid == 0) {
        execl(self, self, "--heartbeat", file, (char *)NULL);
        _exit(127);
    }
    return (unsigned long)pid;
}
#endif

/* A question it has no answer for: said on stderr (the server's error then names it) and noted
 * in unanswered.txt beside the executable, which the smoke and the contract test check is absent
 * (a question the server asks and then shrugs off would otherwise go unseen). */
static int unanswered(const char *what, const char *question)
{
    char path[PATH_MAX_LEN + 32];
    own_path(path, PATH_MAX_LEN);
    char *slash = strrchr(path, SEPARATOR);
    if (slash) {
        strcpy(slash + 1, "unanswered.txt");
        FILE *note = fopen(path, "a");
        if (note) {
            fprintf(note, "%s %s\n", what, question);
            fclose(note);
        }
    }
    fprintf(stderr, "stand-in python: no answer for %s %.200s\n", what, question);
    return 2;
}

static int heartbeat(const char *file)
{
    for (int beat = 0; beat < 600; beat++) {
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%d\n", beat);
            fclose(f);
        }
        sleep_ms(100);
    }
    return 0;
}

static int start_child(const char *file)
{
    char self[PATH_MAX_LEN];
    own_path(self, sizeof self);
    unsigned long pid = spawn_heartbeat(self, file);
    if (pid == 0)
        return 1;
    printf("CHILD %lu\n", pid);
    fflush(stdout);
    return 0;
}

static int answer(const char *code)
{
    char self[PATH_MAX_LEN], dir[PATH_MAX_LEN];
    own_path(self, sizeof self);
    strcpy(dir, self);
    char *slash = strrchr(dir, SEPARATOR);
    if (slash)
        *slash = '\0';
    if (strstr(code, "compileall")) {
        puts("unsupported");
    } else if (strstr(code, "platform.python_version")) {
        printf("3.12.0\nS %s%cLib%csite-packages\nR %s\n", dir, SEPARATOR, SEPARATOR, dir);
    } else if (strstr(code, "sys.executable")) {
        puts(self);
    } else {
        return unanswered("-c", code);
    }
    return 0;
}

/* Python's flags that take no value (-I, -u, -B, ...), as a run may put them before the script. */
static int plain_flags(const char *arg)
{
    if (arg[0] != '-' || arg[1] == '\0' || arg[1] == '-')
        return 0;
    for (const char *c = arg + 1; *c; c++)
        if (!strchr("BEIOPqsSuv", *c))
            return 0;
    return 1;
}

static int run(int argc, char **argv, int first)
{
    int code = 0;
    for (int i = first + 1; i < argc; i++)
        printf("ARGV %s\n", argv[i]);
    FILE *script = fopen(argv[first], "r");
    if (!script) {
        fprintf(stderr, "cannot open %s\n", argv[first]);
        return 2;
    }
    char line[1024], arg[1024];
    int number;
    while (fgets(line, sizeof line, script)) {
        fputs(line, stdout);
        fflush(stdout);
        if (sscanf(line, "#standin exit %d", &number) == 1)
            code = number;
        else if (sscanf(line, "#standin sleep %d", &number) == 1)
            sleep_ms((unsigned)number * 1000);
        else if (sscanf(line, "#standin child %1023s", arg) == 1 && start_child(arg) != 0)
            code = 1;
    }
    fclose(script);
    return code;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        puts("Python 3.12.0");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--heartbeat") == 0)
        return heartbeat(argv[2]);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-c") == 0)
            return answer(argv[i + 1]);
    int first = 1;
    while (first < argc && plain_flags(argv[first]))
        first++;
    if (first < argc && argv[first][0] == '-')
        return unanswered("the option", argv[first]);
    if (first < argc)
        return run(argc, argv, first);
    fprintf(stderr, "usage: python [-IuB...] SCRIPT [ARGS] | python -c CODE | python --version\n");
    return 2;
}
