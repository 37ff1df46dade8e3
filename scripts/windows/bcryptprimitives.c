/* A stand-in for Windows' bcryptprimitives.dll, for Wine before 8.13 (Debian 12 ships 8.0):
 * Rust's standard library (1.78 and later) takes its randomness from ProcessPrng, which Wine
 * adds only in 8.13. This one asks bcrypt.dll, which Wine 8.0 has. Only for the Wine smoke
 * test (scripts/test-windows.sh); never shipped. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
