/* A stand-in python.exe for the Wine smoke test (scripts/test-windows.sh): enough of an
 * interpreter for the server's start-up questions, then runs that show what the server did.
 *
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
 * Never shipped: real Python is what users run. */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int heartbeat(const char *file)
{
    for (int beat = 0; beat < 600; beat++) {
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%d\n", beat);
            fclose(f);
        }
        Sleep(100);
    }
    return 0;
}

static int start_child(const char *file)
{
    char self[MAX_PATH], line[2 * MAX_PATH + 32];
    STARTUPINFOA si = {sizeof si};
    PROCESS_INFORMATION pi;
    GetModuleFileNameA(NULL, self, sizeof self);
    snprintf(line, sizeof line, "\"%s\" --heartbeat \"%s\"", self, file);
    if (!CreateProcessA(self, line, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
        fprintf(stderr, "CreateProcess failed: %lu\n", GetLastError());
        return 1;
    }
    printf("CHILD %lu\n", pi.dwProcessId);
    fflush(stdout);
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    return 0;
}

static int answer(const char *code)
{
    char self[MAX_PATH], dir[MAX_PATH];
    GetModuleFileNameA(NULL, self, sizeof self);
    strcpy(dir, self);
    char *slash = strrchr(dir, '\\');
    if (slash)
        *slash = '\0';
    if (strstr(code, "compileall")) {
        puts("unsupported");
    } else if (strstr(code, "platform.python_version")) {
        printf("3.12.0\nS %s\\Lib\\site-packages\nR %s\n", dir, dir);
    } else if (strstr(code, "sys.executable")) {
        puts(self);
    }
    return 0;
}

static int run(int argc, char **argv)
{
    int code = 0;
    for (int i = 2; i < argc; i++)
        printf("ARGV %s\n", argv[i]);
    FILE *script = fopen(argv[1], "r");
    if (!script) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
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
            Sleep(number * 1000);
        else if (sscanf(line, "#standin child %1023s", arg) == 1 && start_child(arg) != 0)
            code = 1;
    }
    fclose(script);
    return code;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (argc == 3 && strcmp(argv[1], "--heartbeat") == 0)
        return heartbeat(argv[2]);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-c") == 0)
            return answer(argv[i + 1]);
    if (argc >= 2)
        return run(argc, argv);
    fprintf(stderr, "usage: python SCRIPT [ARGS] | python -c CODE\n");
    return 2;
}
