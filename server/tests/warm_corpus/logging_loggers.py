# warm corpus: the loggers that exist before the script makes any
import logging

print(sorted(logging.Logger.manager.loggerDict))
print(logging.getLoggerClass().__name__, logging.getLogRecordFactory().__name__)
print(logging.root.manager.disable)
