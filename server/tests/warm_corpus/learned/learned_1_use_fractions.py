# warm corpus: imports the stdlib's fractions (a warm server learns it for this folder)
import fractions

print(fractions.Fraction(1, 3) + fractions.Fraction(1, 6))
print(getattr(fractions, "SOURCE", "stdlib fractions"))
