# warm corpus: locale and time zone a run starts with
import locale
import time

print("setlocale", locale.setlocale(locale.LC_ALL, None))
print("getlocale", locale.getlocale())
print("preferred", locale.getpreferredencoding(False), locale.getencoding())
print("decimal point", repr(locale.localeconv()["decimal_point"]))
print("tzname", time.tzname, time.timezone, time.daylight)
print("setlocale from the environment", locale.setlocale(locale.LC_ALL, ""))
print("format", time.strftime("%Y-%m-%d", time.gmtime(0)))
